//! A writer for the `newc` cpio format, the one the kernel unpacks as an initramfs.
//!
//! Entries are built in memory (an initramfs is a few MiB), with fixed owner (root) and
//! mtime, so the same inputs give the same archive.

/// Builds a `newc` archive in memory.
#[derive(Debug, Default)]
pub struct Archive {
    data: Vec<u8>,
    next_ino: u32,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

impl Archive {
    /// An empty archive.
    pub fn new() -> Self {
        Self {
            data: Vec::new(),
            next_ino: 1,
        }
    }

    /// Adds a directory (parents must be added first; the kernel does not create them).
    pub fn dir(&mut self, path: &str, perm: u32) {
        self.entry(path, S_IFDIR | perm, 2, (0, 0), &[]);
    }

    /// Adds a regular file.
    pub fn file(&mut self, path: &str, perm: u32, contents: &[u8]) {
        self.entry(path, S_IFREG | perm, 1, (0, 0), contents);
    }

    /// Adds a symbolic link pointing at `target`.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes());
    }

    /// Adds a character device node.
    pub fn char_dev(&mut self, path: &str, perm: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | perm, 1, (major, minor), &[]);
    }

    /// Appends the trailer and returns the archive bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.next_ino = 0;
        self.header("TRAILER!!!", 0, 1, (0, 0), 0);
        self.data
    }

    fn entry(&mut self, path: &str, mode: u32, nlink: u32, rdev: (u32, u32), contents: &[u8]) {
        let path = path.trim_start_matches('/');
        assert!(!path.is_empty(), "cpio entry without a name");
        let size = u32::try_from(contents.len()).expect("cpio newc entries are limited to 4 GiB");
        self.header(path, mode, nlink, rdev, size);
        self.data.extend_from_slice(contents);
        self.pad();
    }

    fn header(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), size: u32) {
        let ino = self.next_ino;
        self.next_ino += 1;
        let namesize = name.len() as u32 + 1;
        let fields = [
            ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, namesize, 0,
        ];
        self.data.extend_from_slice(b"070701");
        for field in fields {
            self.data
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.data.extend_from_slice(name.as_bytes());
        self.data.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.data.len().is_multiple_of(4) {
            self.data.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_newc() {
        let mut a = Archive::new();
        a.dir("bin", 0o755);
        a.file("/bin/x", 0o755, b"hello");
        a.symlink("bin/sh", "busybox");
        let bytes = a.finish();
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
        // First header: 6 + 13 * 8 = 110 bytes, then "bin\0" (already 4-aligned at 114).
        assert_eq!(&bytes[110..114], b"bin\0");
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("bin/x\0"));
        assert!(text.contains("hello"));
        assert!(text.contains("TRAILER!!!\0"));
        // The file header declares size 5 and mode 0100755.
        let second = &text[116..];
        assert_eq!(&second[..6], "070701");
        assert_eq!(&second[14..22], "000081ed");
        assert_eq!(&second[54..62], "00000005");
    }

    #[test]
    fn round_trip_with_system_cpio_if_present() {
        let Some(cpio) = crate::cmd::find_program("cpio") else {
            return;
        };
        let mut a = Archive::new();
        a.dir("d", 0o755);
        a.file("d/f", 0o644, b"abc");
        a.symlink("d/l", "f");
        let bytes = a.finish();
        let mut child = std::process::Command::new(cpio)
            .args(["-t", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "d\nd/f\nd/l\n");
    }
}
