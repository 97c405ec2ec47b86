//! The table's place in docs/PERFORMANCE.md, between two markers.

use std::path::Path;

use crate::util::{Context, Result};

/// Markers around the generated part of docs/PERFORMANCE.md.
pub const DOC_BEGIN: &str = "<!-- cargo xtask bench: begin (generated, do not edit by hand) -->";
pub const DOC_END: &str = "<!-- cargo xtask bench: end -->";

/// Markers around `cargo xtask bench --provider siw`'s section.
pub const SIW_BEGIN: &str = "<!-- cargo xtask bench --provider siw: begin (generated, do not edit by hand) -->";
pub const SIW_END: &str = "<!-- cargo xtask bench --provider siw: end -->";

/// The rxe markers' section.
const HEADING: &str = "## End to end against rdma-core (`cargo xtask bench`)";
/// The siw markers' section.
const SIW_HEADING: &str = "## siw: rverbs rping next to rdma-core's rping (`cargo xtask bench --provider siw`)";

/// Replaces the text between the markers (appends a section when they are missing).
pub fn write_into_doc(doc: &Path, table: &str) -> Result<()> {
    write_between(doc, table, [DOC_BEGIN, DOC_END], HEADING)
}

/// The same for the siw section, between its own markers.
pub fn write_siw_into_doc(doc: &Path, table: &str) -> Result<()> {
    write_between(doc, table, [SIW_BEGIN, SIW_END], SIW_HEADING)
}

fn write_between(doc: &Path, table: &str, markers: [&str; 2], heading: &str) -> Result<()> {
    let old = std::fs::read_to_string(doc).ctx(format!("reading {}", doc.display()))?;
    let new = splice(&old, table, markers, heading);
    std::fs::write(doc, new).ctx(format!("writing {}", doc.display()))
}

fn splice(old: &str, table: &str, [begin, end]: [&str; 2], heading: &str) -> String {
    let block = format!("{begin}\n{}\n{end}", table.trim_end());
    match (old.find(begin), old.find(end)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + end.len()..]),
        _ => format!("{}\n\n{heading}\n\n{block}\n", old.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_between_markers() {
        let doc = format!("# P\n\nbefore\n{DOC_BEGIN}\nold\n{DOC_END}\nafter\n");
        let rxe = [DOC_BEGIN, DOC_END];
        let out = splice(&doc, "new table\n", rxe, HEADING);
        assert_eq!(out, format!("# P\n\nbefore\n{DOC_BEGIN}\nnew table\n{DOC_END}\nafter\n"));
        let appended = splice("# P\n", "t", rxe, HEADING);
        assert!(appended.ends_with(&format!("{DOC_BEGIN}\nt\n{DOC_END}\n")));
        // The siw section: appended once, then replaced in place; the rxe
        // section's text stays as it was.
        let siw = [SIW_BEGIN, SIW_END];
        let with = splice(&out, "siw 1", siw, SIW_HEADING);
        assert!(with.starts_with(out.trim_end()) && with.contains(SIW_HEADING));
        let again = splice(&with, "siw 2", siw, SIW_HEADING);
        assert_eq!(again, with.replace("siw 1", "siw 2"));
        assert!(again.contains(&format!("{DOC_BEGIN}\nnew table\n{DOC_END}")));
    }
}
