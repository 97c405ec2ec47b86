//! The table's place in docs/PERFORMANCE.md, between two markers.

use std::path::Path;

use crate::util::{Context, Result};

/// Markers around the generated part of docs/PERFORMANCE.md.
pub const DOC_BEGIN: &str = "<!-- cargo xtask bench: begin (generated, do not edit by hand) -->";
pub const DOC_END: &str = "<!-- cargo xtask bench: end -->";

/// Replaces the text between the markers (appends a section when they are missing).
pub fn write_into_doc(doc: &Path, table: &str) -> Result<()> {
    let old = std::fs::read_to_string(doc).ctx(format!("reading {}", doc.display()))?;
    let new = splice(&old, table);
    std::fs::write(doc, new).ctx(format!("writing {}", doc.display()))
}

fn splice(old: &str, table: &str) -> String {
    let block = format!("{DOC_BEGIN}\n{}\n{DOC_END}", table.trim_end());
    match (old.find(DOC_BEGIN), old.find(DOC_END)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + DOC_END.len()..]),
        _ => format!("{}\n\n## End to end against rdma-core (`cargo xtask bench`)\n\n{block}\n", old.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_between_markers() {
        let doc = format!("# P\n\nbefore\n{DOC_BEGIN}\nold\n{DOC_END}\nafter\n");
        let out = splice(&doc, "new table\n");
        assert_eq!(out, format!("# P\n\nbefore\n{DOC_BEGIN}\nnew table\n{DOC_END}\nafter\n"));
        let appended = splice("# P\n", "t");
        assert!(appended.ends_with(&format!("{DOC_BEGIN}\nt\n{DOC_END}\n")));
    }
}
