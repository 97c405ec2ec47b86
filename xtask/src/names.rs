//! Names of uverbs ioctl objects and methods, and of the write commands
//! `INVOKE_WRITE` carries, read from the project's own uapi mirror
//! (`uapi/src/ib_user_ioctl_cmds.rs`, `uapi/src/ib_user_verbs.rs`) so the
//! demo never disagrees with the library about a number.
//!
//! Methods are numbered per object; the mirror keeps the header's
//! `// enum uverbs_methods_<object>` comments, which say whose they are.

use std::collections::HashMap;
use std::path::Path;

use crate::util::{Context, Result};

/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`.
const EXTENDED: u64 = 0x8000_0000;

/// The name tables.
#[derive(Debug, Default)]
pub struct Names {
    objects: HashMap<u16, String>,
    /// (object id, method id) -> method name.
    methods: HashMap<(u16, u16), String>,
    cmds: HashMap<u32, String>,
    ex_cmds: HashMap<u32, String>,
}

/// `pub const NAME: TYPE = VALUE;` -> (NAME, VALUE).
fn constant(line: &str) -> Option<(&str, u64)> {
    let rest = line.trim().strip_prefix("pub const ")?;
    let (name, rest) = rest.split_once(':')?;
    let value = rest.split_once('=')?.1.trim().trim_end_matches(';').trim();
    let v = match value.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16).ok()?,
        None => value.replace('_', "").parse().ok()?,
    };
    Some((name.trim(), v))
}

impl Names {
    /// Reads both files under the workspace root.
    pub fn load(root: &Path) -> Result<Names> {
        let ioctl = root.join("uapi/src/ib_user_ioctl_cmds.rs");
        let verbs = root.join("uapi/src/ib_user_verbs.rs");
        let a = std::fs::read_to_string(&ioctl).ctx(format!("reading {}", ioctl.display()))?;
        let b = std::fs::read_to_string(&verbs).ctx(format!("reading {}", verbs.display()))?;
        Ok(Names::parse(&a, &b))
    }

    /// Parses the two files' texts.
    pub fn parse(ioctl_cmds: &str, user_verbs: &str) -> Names {
        let mut n = Names::default();
        let mut by_name: HashMap<String, u16> = HashMap::new();
        for line in ioctl_cmds.lines() {
            if let Some((name, v)) = constant(line) {
                if let Some(o) = name.strip_prefix("UVERBS_OBJECT_") {
                    n.objects.insert(v as u16, o.to_owned());
                    by_name.insert(o.to_owned(), v as u16);
                }
            }
        }
        // Which object the methods that follow belong to.
        let mut owner: Option<u16> = None;
        for line in ioctl_cmds.lines() {
            let t = line.trim();
            if let Some(e) = t.strip_prefix("// enum ") {
                owner = e.strip_prefix("uverbs_methods_").or_else(|| e.strip_prefix("uverbs_method_")).and_then(|o| {
                    let o = o.strip_prefix("actions_").unwrap_or(o);
                    let o = o.strip_suffix("_ops").unwrap_or(o);
                    by_name.get(&o.to_ascii_uppercase()).copied()
                });
            } else if let (Some(obj), Some((name, v))) = (owner, constant(t)) {
                if let Some(m) = name.strip_prefix("UVERBS_METHOD_") {
                    n.methods.insert((obj, v as u16), m.to_owned());
                }
            }
        }
        for line in user_verbs.lines() {
            if let Some((name, v)) = constant(line) {
                if let Some(c) = name.strip_prefix("IB_USER_VERBS_EX_CMD_") {
                    n.ex_cmds.insert(v as u32, format!("EX_{c}"));
                } else if let Some(c) = name.strip_prefix("IB_USER_VERBS_CMD_") {
                    if !matches!(c, "THRESHOLD" | "COMMAND_MASK" | "FLAG_EXTENDED") {
                        n.cmds.insert(v as u32, c.to_owned());
                    }
                }
            }
        }
        n
    }

    /// `CQ` (or `object 42`).
    pub fn object(&self, id: u16) -> String {
        self.objects.get(&id).cloned().unwrap_or_else(|| format!("object {id}"))
    }

    /// `CQ_CREATE` (or `method 7`).
    pub fn method(&self, object: u16, id: u16) -> String {
        self.methods.get(&(object, id)).cloned().unwrap_or_else(|| format!("method {id}"))
    }

    /// `ALLOC_PD`, `EX_QUERY_DEVICE` (from `UVERBS_ATTR_WRITE_CMD`).
    pub fn write_cmd(&self, raw: u64) -> String {
        let num = (raw & 0xff) as u32;
        let table = if raw & EXTENDED != 0 { &self.ex_cmds } else { &self.cmds };
        table.get(&num).cloned().unwrap_or_else(|| format!("command {raw:#x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_projects_uapi() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let n = Names::load(root).unwrap();
        assert_eq!(n.object(0), "DEVICE");
        assert_eq!(n.object(16), "ASYNC_EVENT");
        assert_eq!(n.method(0, 0), "INVOKE_WRITE");
        assert_eq!(n.method(0, 3), "GET_CONTEXT");
        assert_eq!(n.method(3, 0), "CQ_CREATE");
        assert_eq!(n.method(4, 1), "QP_DESTROY");
        assert_eq!(n.method(1, 0), "PD_DESTROY");
        assert_eq!(n.method(7, 1), "MR_DESTROY");
        assert_eq!(n.method(16, 0), "ASYNC_EVENT_ALLOC");
        assert_eq!(n.method(13, 0), "FLOW_ACTION_ESP_CREATE");
        assert_eq!(n.method(15, 2), "COUNTERS_READ");
        assert_eq!(n.write_cmd(3), "ALLOC_PD");
        assert_eq!(n.write_cmd(23), "REQ_NOTIFY_CQ");
        assert_eq!(n.write_cmd(26), "MODIFY_QP");
        assert_eq!(n.write_cmd(0x8000_0001), "EX_QUERY_DEVICE");
        assert_eq!(n.object(99), "object 99");
        assert_eq!(n.method(3, 9), "method 9");
    }
}
