//! Files a guest prints on its console for the host to pick up: the lines
//! between `MARK file NAME` and `MARK end NAME` are the file `NAME`
//! (`cargo xtask demo` marks them `@@DEMO`, `cargo xtask bench` `@@BENCH`).
//! A file whose end line never came (the guest died mid-way) is dropped.

use std::collections::BTreeMap;

/// The files in `lines` delimited by `mark`, by name.
pub fn collect(lines: &[String], mark: &str) -> BTreeMap<String, Vec<String>> {
    let mut files = BTreeMap::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for l in lines {
        if let Some(rest) = l.strip_prefix(mark) {
            let w: Vec<&str> = rest.split_whitespace().collect();
            match w.as_slice() {
                ["file", name] => open = Some((name.to_string(), Vec::new())),
                ["end", name] => {
                    if let Some((n, v)) = open.take().filter(|(n, _)| n == name) {
                        files.insert(n, v);
                    }
                }
                _ => {}
            }
        } else if let Some((_, v)) = open.as_mut() {
            v.push(l.clone());
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

    #[test]
    fn picks_marked_files_only() {
        let c =
            lines("noise\n@@X file a\n1\n2\n@@X end a\nnoise\n@@Y file b\nno\n@@Y end b\n@@X file c\n3\n@@X end c\n");
        let f = collect(&c, "@@X");
        assert_eq!(f.len(), 2);
        assert_eq!(f["a"], ["1", "2"]);
        assert_eq!(f["c"], ["3"]);
    }

    #[test]
    fn drops_an_unfinished_or_mismatched_file() {
        let c = lines("@@X file a\n1\n@@X end b\n@@X file c\n2\n");
        assert!(collect(&c, "@@X").is_empty());
    }
}
