//! Capture files for `capture` and `pktgen --write`: pcap (magic 0xa1b23c4d,
//! nanosecond timestamps, in the host's byte order as libpcap writes them) or pcapng (one Ethernet interface with
//! `if_tsresol` = 9, i.e. nanoseconds), written through the `pcap-file`
//! crate.
//!
//! The file is written under a temporary name in the same directory
//! (`.NAME.partial-PID`) and renamed to its real name only by
//! [`PcapOut::finish`], after everything is flushed and synced; if the
//! writer is dropped without `finish` (an error, a panic) the temporary file
//! is removed. So a file with the real name is always complete.
//!
//! Formats: libpcap `pcap-savefile(5)`; pcapng draft-ietf-opsawg-pcapng
//! (Section Header, Interface Description, Enhanced Packet blocks).

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness, TsResolution};

/// Which file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap with nanosecond timestamps.
    Pcap,
    /// pcapng.
    PcapNg,
}

impl Format {
    /// `pcapng` for a name ending in `.pcapng`, else `pcap`.
    pub fn for_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("pcapng") => Format::PcapNg,
            _ => Format::Pcap,
        }
    }
}

enum Sink {
    Pcap(PcapWriter<BufWriter<File>>),
    PcapNg(PcapNgWriter<BufWriter<File>>),
    Done,
}

/// A capture file being written; see the module docs.
pub struct PcapOut {
    sink: Sink,
    tmp: PathBuf,
    path: PathBuf,
    snaplen: u32,
    frames: u64,
}

/// Why a capture file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PcapOutError {
    /// Creating, writing, syncing or renaming failed.
    #[error("cannot write {path}: {detail} (check that the directory exists and is writable, and that the disk has room)")]
    Write {
        /// The file asked for.
        path: PathBuf,
        /// The cause.
        detail: String,
    },
    /// A snap length outside 1..=262144.
    #[error("--snaplen {0}: give 1 to 262144 bytes")]
    Snaplen(u32),
}

impl PcapOut {
    /// Creates the temporary file next to `path` and writes the file header
    /// (`snaplen` bytes kept per frame at most, 1..=262144, Ethernet link type).
    ///
    /// # Errors
    /// [`PcapOutError::Snaplen`], or [`PcapOutError::Write`] when the file
    /// cannot be created (missing directory, no permission).
    pub fn create(path: &Path, format: Format, snaplen: u32) -> Result<PcapOut, PcapOutError> {
        if !(1..=262_144).contains(&snaplen) {
            return Err(PcapOutError::Snaplen(snaplen));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let err = |detail: String| PcapOutError::Write {
            path: path.to_owned(),
            detail,
        };
        if name.is_empty() || path.is_dir() {
            return Err(err("not a file name".into()));
        }
        let file = File::create(&tmp).map_err(|e| err(e.to_string()))?;
        let w = BufWriter::with_capacity(1 << 20, file);
        let sink = match format {
            Format::Pcap => Sink::Pcap(
                PcapWriter::with_header(
                    w,
                    PcapHeader {
                        snaplen,
                        datalink: DataLink::ETHERNET,
                        ts_resolution: TsResolution::NanoSecond,
                        // pcap-file's default is big-endian; libpcap (and
                        // tcpdump -w) write the host's order.
                        endianness: Endianness::native(),
                        ..Default::default()
                    },
                )
                .map_err(|e| err(e.to_string()))?,
            ),
            Format::PcapNg => {
                let mut ng = PcapNgWriter::new(w).map_err(|e| err(e.to_string()))?;
                ng.write_pcapng_block(InterfaceDescriptionBlock {
                    linktype: DataLink::ETHERNET,
                    snaplen,
                    options: vec![InterfaceDescriptionOption::IfTsResol(9)],
                })
                .map_err(|e| err(e.to_string()))?;
                Sink::PcapNg(ng)
            }
        };
        Ok(PcapOut {
            sink,
            tmp,
            path: path.to_owned(),
            snaplen,
            frames: 0,
        })
    }

    /// Appends one frame received (or sent) at `ts` since the Unix epoch;
    /// at most `snaplen` bytes of `data` are kept, its full length is recorded.
    ///
    /// # Errors
    /// [`PcapOutError::Write`] (e.g. disk full).
    pub fn write(&mut self, ts: Duration, data: &[u8]) -> Result<(), PcapOutError> {
        self.write_commented(ts, data, None)
    }

    /// [`PcapOut::write`] with a pcapng packet comment (`opt_comment`, e.g.
    /// the NIC's checksum status); classic pcap has no place for it and
    /// drops it.
    ///
    /// # Errors
    /// [`PcapOutError::Write`] (e.g. disk full).
    pub fn write_commented(
        &mut self,
        ts: Duration,
        data: &[u8],
        comment: Option<&str>,
    ) -> Result<(), PcapOutError> {
        let keep = &data[..data.len().min(self.snaplen as usize)];
        let orig = data.len() as u32;
        let r = match &mut self.sink {
            Sink::Pcap(w) => w.write_packet(&PcapPacket::new(ts, orig, keep)).map(|_| ()),
            Sink::PcapNg(w) => w
                .write_pcapng_block(EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: ts,
                    original_len: orig,
                    data: Cow::Borrowed(keep),
                    options: comment
                        .map(|c| vec![EnhancedPacketOption::Comment(Cow::Borrowed(c))])
                        .unwrap_or_default(),
                })
                .map(|_| ()),
            Sink::Done => return Ok(()),
        };
        r.map_err(|e| PcapOutError::Write {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes, syncs and renames the file to its real name; returns that name.
    ///
    /// # Errors
    /// [`PcapOutError::Write`]; the temporary file is removed then.
    pub fn finish(mut self) -> Result<PathBuf, PcapOutError> {
        let err = |detail: String, path: &Path| PcapOutError::Write {
            path: path.to_owned(),
            detail,
        };
        let mut w = match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Pcap(w) => w.into_writer(),
            Sink::PcapNg(w) => w.into_inner(),
            Sink::Done => unreachable!("finish consumes the writer"),
        };
        w.flush().map_err(|e| err(e.to_string(), &self.path))?;
        let file = w.into_inner().map_err(|e| err(e.to_string(), &self.path))?;
        file.sync_all()
            .map_err(|e| err(e.to_string(), &self.path))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| err(e.to_string(), &self.path))?;
        Ok(self.path.clone())
    }
}

impl Drop for PcapOut {
    fn drop(&mut self) {
        if !matches!(self.sink, Sink::Done) {
            // Not finished: never leave a file that looks complete.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::PcapReader;
    use pcap_file::pcapng::{Block, PcapNgReader};

    fn frames() -> Vec<Vec<u8>> {
        (0..5u8).map(|i| vec![i; 60 + i as usize * 100]).collect()
    }

    #[test]
    fn pcap_with_nanoseconds_appears_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cap.pcap");
        let mut out = PcapOut::create(&path, Format::for_path(&path), 200).unwrap();
        for (i, f) in frames().iter().enumerate() {
            out.write(Duration::new(1_700_000_000, 123_456_789 + i as u32), f)
                .unwrap();
        }
        assert!(!path.exists(), "no file under the real name before finish");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(out.finish().unwrap(), path);
        let bytes = std::fs::read(&path).unwrap();
        // The nanosecond magic in the host's byte order, as libpcap writes
        // it (pcap-file's default header was big-endian on x86).
        assert_eq!(bytes[..4], 0xa1b2_3c4d_u32.to_ne_bytes());
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header().ts_resolution, TsResolution::NanoSecond);
        let mut n = 0;
        // Raw records: pcap-file's cooked reader refuses orig_len > snaplen,
        // which is exactly what a short snap length produces (tcpdump reads it).
        while let Some(p) = r.next_raw_packet() {
            let p = p.unwrap();
            let want = &frames()[n];
            assert_eq!(p.orig_len as usize, want.len());
            assert_eq!(&p.data[..], &want[..want.len().min(200)]);
            assert_eq!(
                (p.ts_sec, p.ts_frac),
                (1_700_000_000, 123_456_789 + n as u32)
            );
            n += 1;
        }
        assert_eq!(n, 5);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn pcapng_has_nanosecond_interface() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cap.pcapng");
        let mut out = PcapOut::create(&path, Format::for_path(&path), 65535).unwrap();
        out.write(Duration::new(5, 7), &[1; 64]).unwrap();
        out.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut r = PcapNgReader::new(&bytes[..]).unwrap();
        let mut saw = (false, false);
        while let Some(b) = r.next_block() {
            match b.unwrap() {
                Block::InterfaceDescription(i) => {
                    assert!(i
                        .options
                        .contains(&InterfaceDescriptionOption::IfTsResol(9)));
                    saw.0 = true;
                }
                Block::EnhancedPacket(p) => {
                    assert_eq!(p.timestamp, Duration::new(5, 7));
                    assert_eq!(p.data.len(), 64);
                    saw.1 = true;
                }
                _ => {}
            }
        }
        assert_eq!(saw, (true, true));
    }

    #[test]
    fn pcapng_keeps_the_packet_comment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cap.pcapng");
        let mut out = PcapOut::create(&path, Format::for_path(&path), 65535).unwrap();
        out.write_commented(
            Duration::new(1, 0),
            &[2; 60],
            Some("pollnic: checksum ip=good l4=bad"),
        )
        .unwrap();
        out.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut r = PcapNgReader::new(&bytes[..]).unwrap();
        let mut comments = Vec::new();
        while let Some(b) = r.next_block() {
            if let Block::EnhancedPacket(p) = b.unwrap() {
                for o in &p.options {
                    if let EnhancedPacketOption::Comment(c) = o {
                        comments.push(c.to_string());
                    }
                }
            }
        }
        assert_eq!(comments, ["pollnic: checksum ip=good l4=bad"]);
    }

    #[test]
    fn unfinished_or_unwritable_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pcap");
        let mut out = PcapOut::create(&path, Format::Pcap, 100).unwrap();
        out.write(Duration::ZERO, &[0; 60]).unwrap();
        drop(out);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let e = PcapOut::create(&dir.path().join("no/such/dir.pcap"), Format::Pcap, 100)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("cannot write"), "{e}");
        assert!(PcapOut::create(&path, Format::Pcap, 0).is_err());
        assert!(PcapOut::create(dir.path(), Format::Pcap, 100).is_err());
    }
}
