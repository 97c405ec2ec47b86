//! A writer for the `newc` ("070701") cpio format that the Linux kernel
//! unpacks as an initramfs. Debian does not install `cpio` by default, and
//! the format is simple enough to write by hand.
//!
//! All entries are owned by root with mtime 0, so the same inputs give the
//! same bytes.

use std::io::{self, Read, Write};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Streams a newc archive into `W`. Call [`CpioWriter::finish`] at the end.
pub struct CpioWriter<W: Write> {
    out: W,
    ino: u32,
    offset: u64,
}

/// The header fields that differ between entry kinds.
struct Header<'a> {
    name: &'a str,
    mode: u32,
    nlink: u32,
    size: u64,
    rdev: (u32, u32),
}

impl<W: Write> CpioWriter<W> {
    /// Starts an archive.
    pub fn new(out: W) -> Self {
        CpioWriter { out, ino: 0, offset: 0 }
    }

    /// Adds a directory (`name` without a leading `/`).
    pub fn dir(&mut self, name: &str, perm: u32) -> io::Result<()> {
        let h = Header { name, mode: S_IFDIR | perm, nlink: 2, size: 0, rdev: (0, 0) };
        self.header(&h)
    }

    /// Adds a regular file whose `size` bytes are read from `data`.
    pub fn file(&mut self, name: &str, perm: u32, size: u64, data: &mut dyn Read) -> io::Result<()> {
        let h = Header { name, mode: S_IFREG | perm, nlink: 1, size, rdev: (0, 0) };
        self.header(&h)?;
        let copied = io::copy(&mut data.take(size), &mut self.out)?;
        if copied != size {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{name} shrank while archiving")));
        }
        self.offset += size;
        self.pad()
    }

    /// Adds a regular file from memory.
    pub fn bytes(&mut self, name: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.file(name, perm, data.len() as u64, &mut &data[..])
    }

    /// Adds a symbolic link pointing at `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        let t = target.as_bytes();
        let h = Header { name, mode: S_IFLNK | 0o777, nlink: 1, size: t.len() as u64, rdev: (0, 0) };
        self.header(&h)?;
        self.raw(t)?;
        self.pad()
    }

    /// Adds a character device node.
    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> io::Result<()> {
        let h = Header { name, mode: S_IFCHR | perm, nlink: 1, size: 0, rdev: (major, minor) };
        self.header(&h)
    }

    /// Writes the trailer and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        let h = Header { name: "TRAILER!!!", mode: 0, nlink: 1, size: 0, rdev: (0, 0) };
        self.header(&h)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn header(&mut self, h: &Header) -> io::Result<()> {
        let size = u32::try_from(h.size)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} is over 4 GiB", h.name)))?;
        self.ino += 1;
        let fields = [self.ino, h.mode, 0, 0, h.nlink, 0, size, 0, 0, h.rdev.0, h.rdev.1, h.name.len() as u32 + 1, 0];
        let mut head = String::from("070701");
        for f in fields {
            head.push_str(&format!("{f:08x}"));
        }
        self.raw(head.as_bytes())?;
        self.raw(h.name.as_bytes())?;
        self.raw(&[0])?;
        self.pad()
    }

    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.offset += b.len() as u64;
        Ok(())
    }

    /// Pads to the next multiple of 4 bytes.
    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.offset % 4) as usize) % 4;
        self.raw(&[0u8; 3][..n])
    }
}

#[cfg(test)]
mod tests {
    use super::CpioWriter;

    #[test]
    fn layout_matches_newc() {
        let mut w = CpioWriter::new(Vec::new());
        w.dir("etc", 0o755).unwrap();
        w.bytes("etc/a", 0o644, b"hello").unwrap();
        w.symlink("bin", "usr/bin").unwrap();
        let out = w.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        assert!(out.starts_with(b"070701"));
        // Header of "etc": 110 bytes + "etc\0" = 114, padded to 116.
        assert_eq!(&out[116..122], b"070701");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("etc/a\0"));
        assert!(text.contains("hello"));
        assert!(text.contains("usr/bin"));
        assert!(text.ends_with("TRAILER!!!\0\0\0\0") || text.contains("TRAILER!!!\0"));
        // File size field of "etc/a" (7th field) is 5.
        let at = text.find("etc/a\0").unwrap() - 110;
        assert_eq!(&text[at + 6 + 6 * 8..at + 6 + 7 * 8], "00000005");
    }
}
