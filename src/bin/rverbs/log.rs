//! `RVERBS_LOG`: a minimal `tracing` subscriber for the `rverbs` tool.
//!
//! The library emits `tracing` events on its control path (a span per verb,
//! an event per uverbs command with the object/method ids and the path
//! taken) and nothing on its data path. This subscriber prints them, one
//! line per span and per event, so `strace` runs and bug reports can say
//! which command each syscall was. It is written against the `tracing`
//! crate alone (no `tracing-subscriber`).
//!
//! * `RVERBS_LOG=off|error|warn|info|debug|trace` (`1`/`on` = `debug`)
//!   sets the most verbose level shown; unset or empty installs nothing.
//! * `RVERBS_LOG_FILE=PATH` appends the lines to PATH instead of stderr
//!   (each line is one `write()`, `O_APPEND`, so two processes can share a
//!   file; `cargo xtask demo` uses it to keep the program's stderr apart).
//!
//! Line format (`+seconds LEVEL target: span{fields}: message field=value`):
//!
//! ```text
//! +0.004121 DEBUG rverbs::pd: span ibv_alloc_pd
//! +0.004318 TRACE rverbs_providers::sys: ibv_alloc_pd: uverbs command ok object=0 method=0 path=Ioctl write_cmd=3
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// Installs the subscriber when `RVERBS_LOG` asks for one. Problems with
/// the variables are reported on stderr and never stop the program.
pub fn init() {
    let Some(spec) = std::env::var_os("RVERBS_LOG") else {
        return;
    };
    let spec = spec.to_string_lossy();
    let max = match parse_level(&spec) {
        Ok(Some(l)) => l,
        Ok(None) => return,
        Err(()) => {
            eprintln!("rverbs: ignoring RVERBS_LOG={spec:?} (expected off, error, warn, info, debug or trace)");
            return;
        }
    };
    let out = match std::env::var_os("RVERBS_LOG_FILE").filter(|p| !p.is_empty()) {
        None => Out::Stderr,
        Some(path) => match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => Out::File(f),
            Err(e) => {
                eprintln!("rverbs: cannot open RVERBS_LOG_FILE {}: {e}; logging to stderr", path.to_string_lossy());
                Out::Stderr
            }
        },
    };
    let sub =
        LineLogger { max, out, start: Instant::now(), next_id: AtomicU64::new(1), spans: Mutex::new(HashMap::new()) };
    // Fails only when a subscriber is already installed: keep that one.
    let _ = tracing::subscriber::set_global_default(sub);
}

/// `RVERBS_LOG`'s value: `Ok(None)` means off.
fn parse_level(s: &str) -> Result<Option<Level>, ()> {
    Ok(Some(match s.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "none" => return Ok(None),
        "error" => Level::ERROR,
        "warn" | "warning" => Level::WARN,
        "info" => Level::INFO,
        "1" | "on" | "debug" => Level::DEBUG,
        "trace" => Level::TRACE,
        _ => return Err(()),
    }))
}

enum Out {
    Stderr,
    File(File),
}

/// A span's name and its fields, rendered once.
struct SpanData {
    name: &'static str,
    fields: String,
    refs: usize,
}

struct LineLogger {
    max: Level,
    out: Out,
    start: Instant,
    next_id: AtomicU64,
    spans: Mutex<HashMap<u64, SpanData>>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Renders fields as ` name=value` (the message first, bare).
struct Fields<'a> {
    out: &'a mut String,
    message: String,
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.out, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else if value.is_empty() || value.contains(char::is_whitespace) {
            let _ = write!(self.out, " {}={value:?}", field.name());
        } else {
            let _ = write!(self.out, " {}={value}", field.name());
        }
    }
}

impl LineLogger {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SpanData>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `+secs LEVEL target: ` then the entered spans.
    fn head(&self, meta: &Metadata<'_>) -> String {
        let mut line = format!("+{:.6} {:<5} {}: ", self.start.elapsed().as_secs_f64(), meta.level(), meta.target());
        let spans = self.lock();
        STACK.with(|s| {
            for id in s.borrow().iter() {
                if let Some(d) = spans.get(id) {
                    let _ = write!(line, "{}{}: ", d.name, braced(&d.fields));
                }
            }
        });
        line
    }

    /// One `write()` per line, errors ignored (logging never fails the program).
    fn emit(&self, mut line: String) {
        line.push('\n');
        let _ = match &self.out {
            Out::Stderr => std::io::stderr().lock().write_all(line.as_bytes()),
            Out::File(f) => (&*f).write_all(line.as_bytes()),
        };
    }
}

/// ` a=1 b=2` -> `{a=1 b=2}`.
fn braced(fields: &str) -> String {
    let f = fields.trim_start();
    if f.is_empty() {
        String::new()
    } else {
        format!("{{{f}}}")
    }
}

impl Subscriber for LineLogger {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::from_level(self.max))
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut fields = String::new();
        let mut v = Fields { out: &mut fields, message: String::new() };
        attrs.record(&mut v);
        let meta = attrs.metadata();
        let mut line = self.head(meta);
        let _ = write!(line, "span {}{fields}", meta.name());
        self.emit(line);
        self.lock().insert(id, SpanData { name: meta.name(), fields, refs: 1 });
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(d) = self.lock().get_mut(&span.into_u64()) {
            let mut v = Fields { out: &mut d.fields, message: String::new() };
            values.record(&mut v);
        }
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = String::new();
        let mut v = Fields { out: &mut fields, message: String::new() };
        event.record(&mut v);
        let message = v.message;
        let mut line = self.head(event.metadata());
        line.push_str(&message);
        line.push_str(&fields);
        self.emit(line);
    }

    fn enter(&self, span: &Id) {
        STACK.with(|s| s.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(pos) = s.iter().rposition(|&x| x == id) {
                s.remove(pos);
            }
        });
    }

    fn clone_span(&self, id: &Id) -> Id {
        if let Some(d) = self.lock().get_mut(&id.into_u64()) {
            d.refs += 1;
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let mut spans = self.lock();
        let key = id.into_u64();
        match spans.get_mut(&key) {
            Some(d) if d.refs > 1 => {
                d.refs -= 1;
                false
            }
            Some(_) => {
                spans.remove(&key);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(parse_level("trace"), Ok(Some(Level::TRACE)));
        assert_eq!(parse_level(" DEBUG "), Ok(Some(Level::DEBUG)));
        assert_eq!(parse_level("1"), Ok(Some(Level::DEBUG)));
        assert_eq!(parse_level("warn"), Ok(Some(Level::WARN)));
        assert_eq!(parse_level(""), Ok(None));
        assert_eq!(parse_level("off"), Ok(None));
        assert_eq!(parse_level("loud"), Err(()));
    }

    #[test]
    fn lines_have_spans_and_fields() {
        let path = std::env::temp_dir().join(format!("rverbs-log-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sub = LineLogger {
            max: Level::DEBUG,
            out: Out::File(OpenOptions::new().create(true).append(true).open(&path).unwrap()),
            start: Instant::now(),
            next_id: AtomicU64::new(1),
            spans: Mutex::new(HashMap::new()),
        };
        tracing::subscriber::with_default(sub, || {
            let span = tracing::debug_span!("ibv_create_cq", cqe = 10).entered();
            tracing::debug!(verb = "ibv_create_cq", object = 3u16, "uverbs command");
            tracing::trace!("hidden");
            drop(span);
            tracing::info!(name = "two words", "after");
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].ends_with("DEBUG rverbs::log::tests: span ibv_create_cq cqe=10"), "{}", lines[0]);
        assert!(
            lines[1].ends_with(": ibv_create_cq{cqe=10}: uverbs command verb=ibv_create_cq object=3"),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with("INFO  rverbs::log::tests: after name=\"two words\""), "{}", lines[2]);
        assert!(lines.iter().all(|l| l.starts_with('+')));
    }
}
