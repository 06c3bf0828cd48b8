//! The testbed counter's per-function profile, read from inside the guest.
//!
//! The TCG plugin (`xtask/plugin/pollnic_count.c`) keeps, per vCPU, the
//! instructions executed from each translated block's start address: all of
//! them, and those inside committed marked regions ([`crate::marker`]). The
//! [`crate::marker::profile`] marker makes it write, to
//! `$POLLNIC_COUNTS.prof` and before the marker returns, what ran since the
//! previous such marker. [`Profile::take`] does that and reads the file:
//! call it once to start a window and once to end it. [`Symbols`] turns
//! block addresses into function names (the guest kernel's from
//! `/proc/kallsyms`, a process's from its `/proc/PID/maps` and the ELF
//! symbols of the files mapped there), and [`top_functions`] adds the blocks
//! up per function.
//!
//! A block is attributed to the function its first instruction is in (a
//! translated block never spans a call or a jump, so it rarely crosses a
//! function's end). Inlined code counts in the function it was inlined into.

use crate::counts::Counter;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// One profile file: what ran since the previous [`Profile::take`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// The plugin's sequence number of this file.
    pub seq: u64,
    /// Per block start address (`None`: blocks that found no slot in the
    /// plugin's table): instructions per vCPU, all and marked.
    pub blocks: HashMap<Option<u64>, Block>,
    /// Per vCPU: instructions of committed marked regions that did not fit
    /// the plugin's per-region log (missing from the marked profile).
    pub lost: Vec<u64>,
    /// MMIO sites (device register accesses) that ran, with their counts.
    pub mmio: Vec<MmioSite>,
}

/// One MMIO site of a profile: the accesses one instruction made to one
/// device register address, per vCPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MmioSite {
    /// Guest physical address of the register (`None`: accesses that found
    /// no slot in the plugin's table).
    pub phys: Option<u64>,
    /// A write (else a read).
    pub write: bool,
    /// The instruction's address (resolved with [`Symbols`]).
    pub pc: u64,
    /// QEMU's name for the device region (`igb-mmio`, `virtio-pci-notify`).
    pub device: String,
    /// Accesses per vCPU (index = vCPU).
    pub count: Vec<u64>,
}

/// One block's instructions (index = vCPU).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    /// Every execution.
    pub all: Vec<u64>,
    /// Executions inside committed marked regions.
    pub marked: Vec<u64>,
}

impl Profile {
    /// Ask the plugin for what ran since the previous call (since boot for
    /// the first) and read it; `Ok(None)` outside a counting guest (no
    /// `$POLLNIC_COUNTS`).
    ///
    /// # Errors
    /// The file is missing, unreadable or malformed after the marker ran (a
    /// plugin started with `profile=0`, or an old plugin build).
    pub fn take() -> Result<Option<Profile>, String> {
        let Some(path) = Self::mark()? else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading the profile {}: {e}", path.display()))?;
        parse(&text)
            .map(Some)
            .ok_or_else(|| format!("{}: not a whole pollnic-prof file", path.display()))
    }

    /// Start a window: [`Profile::take`] without reading what ran before
    /// (since boot, the first time: every block the guest ever ran).
    ///
    /// # Errors
    /// As [`Profile::take`].
    pub fn start() -> Result<bool, String> {
        Self::mark().map(|p| p.is_some())
    }

    /// Run the marker and check that the plugin rewrote the file (its
    /// first line's sequence number changed); the file's path.
    fn mark() -> Result<Option<PathBuf>, String> {
        let Some(counter) = Counter::from_env() else {
            return Ok(None);
        };
        let mut path: PathBuf = counter.path().into();
        path.as_mut_os_string().push(".prof");
        let head = || -> Option<String> {
            use std::io::BufRead;
            let f = std::fs::File::open(&path).ok()?;
            std::io::BufReader::new(f).lines().next()?.ok()
        };
        let before = head();
        crate::marker::profile();
        let after = head();
        if after.is_none() || after == before {
            return Err(format!(
                "{}: the plugin did not write the profile ({}): was it started with profile=0 (`--count-no-profile`)?",
                path.display(),
                after.unwrap_or_else(|| "no file".into())
            ));
        }
        Ok(Some(path))
    }

    /// Instructions over the vCPUs `pick` accepts: (all, marked).
    pub fn totals(&self, pick: impl Fn(usize) -> bool) -> (u64, u64) {
        let sum = |v: &[u64]| -> u64 {
            v.iter()
                .enumerate()
                .filter(|(i, _)| pick(*i))
                .map(|(_, x)| x)
                .sum()
        };
        self.blocks
            .values()
            .fold((0, 0), |(a, m), b| (a + sum(&b.all), m + sum(&b.marked)))
    }
}

/// Parse a profile file; `None` when it is torn or malformed.
pub fn parse(text: &str) -> Option<Profile> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let ["pollnic-prof", "1", "seq", seq, "vcpus", n, "slots", _, "used", _, "unplaced", _] =
        head[..]
    else {
        return None;
    };
    let (seq, n): (u64, usize) = (seq.parse().ok()?, n.parse().ok()?);
    let mut lost = Vec::with_capacity(n);
    for i in 0..n {
        let w: Vec<&str> = lines.next()?.split_whitespace().collect();
        if w.len() != 3 || w[0] != "lost" || w[1].parse::<usize>().ok()? != i {
            return None;
        }
        lost.push(w[2].parse().ok()?);
    }
    let mut blocks = HashMap::new();
    let mut mmio = Vec::new();
    for line in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"end") {
            return (w.len() == 2 && w[1].parse::<u64>().ok()? == seq).then_some(Profile {
                seq,
                blocks,
                lost,
                mmio,
            });
        }
        if w.first() == Some(&"mmio-unplaced") || w.first() == Some(&"mmio") {
            let (site, counts) = match w[..] {
                ["mmio-unplaced", ref c @ ..] => (MmioSite::default(), c),
                ["mmio", phys, rw @ ("r" | "w"), pc, device, ref c @ ..] => (
                    MmioSite {
                        phys: Some(u64::from_str_radix(phys, 16).ok()?),
                        write: rw == "w",
                        pc: u64::from_str_radix(pc, 16).ok()?,
                        device: device.into(),
                        count: Vec::new(),
                    },
                    c,
                ),
                _ => return None,
            };
            if counts.len() != n {
                return None;
            }
            let count = counts
                .iter()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            mmio.push(MmioSite { count, ..site });
            continue;
        }
        if w.len() != 1 + 2 * n {
            return None;
        }
        let key = match w[0] {
            "unplaced" => None,
            a => Some(u64::from_str_radix(a, 16).ok()?),
        };
        let v: Vec<u64> = w[1..]
            .iter()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        blocks.insert(
            key,
            Block {
                all: v[..n].to_vec(),
                marked: v[n..].to_vec(),
            },
        );
    }
    None
}

/// The kernel's half of the x86-64 address space starts above the canonical hole.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Function symbols sorted by address, their names kept as ranges of one
/// string and made readable only when asked for ([`Table::name`]): parsing
/// all of `/proc/kallsyms` or a debug build's symbol table into strings
/// takes a TCG guest many seconds.
#[derive(Clone, Debug, Default)]
struct Table {
    names: String,
    /// (start, size or 0, name offset, name length).
    syms: Vec<(u64, u64, usize, usize)>,
    /// Rust and C++ names are demangled for display.
    mangled: bool,
}

impl Table {
    fn new(names: String, mut syms: Vec<(u64, u64, usize, usize)>, mangled: bool) -> Table {
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        Table {
            names,
            syms,
            mangled,
        }
    }

    /// The symbol that holds `addr`: the last one starting at or below it,
    /// if `addr` is inside its size (or within `slack` when its size is 0).
    fn find(&self, addr: u64, slack: u64) -> Option<usize> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, size, _, _) = self.syms[i];
        let end = start.saturating_add(if size > 0 { size } else { slack });
        (addr < end).then_some(i)
    }

    /// Symbol `i`'s name, for display.
    fn name(&self, i: usize) -> String {
        let (_, _, off, len) = self.syms[i];
        let raw = &self.names[off..off + len];
        if self.mangled {
            format!("{:#}", rustc_demangle::demangle(raw))
        } else {
            raw.replace('\t', " ")
        }
    }
}

/// [`Mapping::table`] of a mapping with no file (`[vdso]`).
const NO_TABLE: usize = usize::MAX;

/// An executable mapping of a process.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
    file: String,
    /// Index of the file's symbols in [`Symbols::tables`], or [`NO_TABLE`].
    table: usize,
}

/// An ELF file's load segments, (file offset, size, virtual address) each,
/// and its function symbols.
#[derive(Clone, Debug, Default)]
struct FileSymbols {
    segments: Vec<(u64, u64, u64)>,
    table: Table,
}

/// Address-to-function names for the guest kernel and some processes.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// Index 0: the kernel's (no segments); then one per mapped file.
    tables: Vec<Arc<FileSymbols>>,
    user: Vec<Mapping>,
}

/// Where an address falls: a symbol of a table, or only a label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Place {
    Symbol(usize, usize),
    Label(String),
}

impl Symbols {
    /// The kernel's symbols (`/proc/kallsyms`, modules included, each named
    /// `function [module]`) and the executable mappings of the processes
    /// `pids`, then of every other process (their ELF `.symtab` when the
    /// file has one, else `.dynsym`: a stripped library's static functions
    /// then count under the exported function before them). Read them
    /// while the processes still run. What cannot be read is left out, and
    /// its addresses print as `[kernel]`, `[file name]`, or `[user]` for
    /// code whose first process has exited (see [`top_functions`]).
    ///
    /// The kernel's table and each file's are read once per process and
    /// kept (a file mapped again is not read again).
    pub fn load(pids: &[u32]) -> Symbols {
        static KERNEL: OnceLock<Arc<FileSymbols>> = OnceLock::new();
        static FILES: Mutex<BTreeMap<String, Arc<FileSymbols>>> = Mutex::new(BTreeMap::new());
        let kernel = KERNEL
            .get_or_init(|| {
                Arc::new(FileSymbols {
                    segments: Vec::new(),
                    table: std::fs::read_to_string("/proc/kallsyms")
                        .map(kallsyms)
                        .unwrap_or_default(),
                })
            })
            .clone();
        let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
        let mut tables = vec![kernel];
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        let mut user = Vec::new();
        // The processes asked for first, then every other one: TCG shares a
        // translated block between processes that map the same physical
        // code (a shared library), and the profile keys it by the address
        // it had in the process that ran it first; that process's mapping
        // of the same file names it.
        let others = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| !pids.contains(p));
        let all: Vec<u32> = pids.iter().copied().chain(others).collect();
        for pid in &all {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                continue;
            };
            for (start, end, offset, file) in executable_mappings(&maps) {
                if file.starts_with('[') {
                    user.push(Mapping {
                        start,
                        end,
                        offset,
                        file,
                        table: NO_TABLE,
                    });
                    continue;
                }
                let table = *index.entry(file.clone()).or_insert_with(|| {
                    let syms = files
                        .entry(file.clone())
                        .or_insert_with(|| Arc::new(elf_symbols(&file).unwrap_or_default()))
                        .clone();
                    tables.push(syms);
                    tables.len() - 1
                });
                user.push(Mapping {
                    start,
                    end,
                    offset,
                    file,
                    table,
                });
            }
        }
        Symbols { tables, user }
    }

    /// Where `addr` falls.
    fn place(&self, addr: u64) -> Place {
        if addr >= KERNEL_START {
            // kallsyms gives no sizes: a function ends where the next starts.
            return match self
                .tables
                .first()
                .and_then(|k| k.table.find(addr, 1 << 20))
            {
                Some(i) => Place::Symbol(0, i),
                None => Place::Label("[kernel]".into()),
            };
        }
        let Some(m) = self.user.iter().find(|m| m.start <= addr && addr < m.end) else {
            return Place::Label("[user]".into());
        };
        if m.table == NO_TABLE {
            return Place::Label(m.file.clone());
        }
        let file_off = addr - m.start + m.offset;
        let f = &self.tables[m.table];
        let vaddr = f
            .segments
            .iter()
            .find(|(off, size, _)| *off <= file_off && file_off < off + size)
            .map(|(off, _, va)| va + (file_off - off));
        match vaddr.and_then(|va| f.table.find(va, 0)) {
            Some(i) => Place::Symbol(m.table, i),
            None => Place::Label(format!(
                "[{}]",
                m.file.rsplit('/').next().unwrap_or(&m.file)
            )),
        }
    }

    fn describe(&self, p: &Place) -> String {
        match p {
            Place::Symbol(t, i) => self.tables[*t].table.name(*i),
            Place::Label(l) => l.clone(),
        }
    }

    /// The function that holds `addr`.
    pub fn name(&self, addr: u64) -> String {
        self.describe(&self.place(addr))
    }
}

/// `/proc/kallsyms`: text symbols (t, T, w, W), named with their module.
fn kallsyms(text: String) -> Table {
    let mut syms = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end_matches('\n');
        let b = l.as_bytes();
        // `ffffffff81000000 T name\t[module]`
        if b.len() > 19
            && b[16] == b' '
            && b[18] == b' '
            && matches!(b[17], b't' | b'T' | b'w' | b'W')
        {
            if let Ok(addr) = u64::from_str_radix(&l[..16], 16) {
                if addr != 0 {
                    syms.push((addr, 0, at + 19, l.len() - 19));
                }
            }
        }
        at += line.len();
    }
    Table::new(text, syms, false)
}

/// The executable lines of `/proc/PID/maps` with a file or a name
/// (`[vdso]`): (start, end, offset, path or name).
fn executable_mappings(maps: &str) -> Vec<(u64, u64, u64, String)> {
    maps.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (range, perms, offset) = (w.next()?, w.next()?, w.next()?);
            let path = w.nth(2)?;
            if !perms.contains('x') || !(path.starts_with('/') || path.starts_with('[')) {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
                u64::from_str_radix(offset, 16).ok()?,
                path.to_string(),
            ))
        })
        .collect()
}

/// An ELF file's load segments and function symbols.
fn elf_symbols(path: &str) -> Option<FileSymbols> {
    use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
    // Read on demand: only the headers and the symbol tables, not a debug
    // build's whole file (the guest reads it over 9p).
    let data = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let file = object::File::parse(&data).ok()?;
    let segments = file
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then_some((off, size, s.address()))
        })
        .collect();
    let mut syms: Vec<_> = file.symbols().collect();
    if syms.is_empty() {
        syms = file.dynamic_symbols().collect();
    }
    let mut names = String::new();
    let mut v = Vec::new();
    for s in syms {
        if s.kind() != SymbolKind::Text || s.address() == 0 {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        v.push((s.address(), s.size(), names.len(), name.len()));
        names.push_str(name);
    }
    Some(FileSymbols {
        segments,
        table: Table::new(names, v, true),
    })
}

/// One function's share of a profile.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FunctionCost {
    /// The function (`name [module]` for a kernel module's).
    pub function: String,
    /// Its instructions over the picked vCPUs.
    pub instructions: u64,
}

/// The `n` functions with the most instructions in `profile` over the vCPUs
/// `pick` accepts, from the marked counts (`marked`) or from all, and the
/// total over every function.
///
/// `[user]` collects user-mode blocks that no running process maps: TCG
/// translates a shared library's code once for every process that maps
/// the same physical page, and keys the block by the address of the
/// process that ran it first; when that process has exited, the block
/// cannot be named (its instructions still count, here).
pub fn top_functions(
    profile: &Profile,
    pick: impl Fn(usize) -> bool,
    marked: bool,
    symbols: &Symbols,
    n: usize,
) -> (Vec<FunctionCost>, u64) {
    let mut per: HashMap<Place, u64> = HashMap::new();
    let mut total = 0;
    for (addr, b) in &profile.blocks {
        let v = if marked { &b.marked } else { &b.all };
        let insns: u64 = v
            .iter()
            .enumerate()
            .filter(|(i, _)| pick(*i))
            .map(|(_, x)| x)
            .sum();
        if insns == 0 {
            continue;
        }
        total += insns;
        let place = addr.map_or_else(
            || Place::Label("[unplaced blocks]".into()),
            |a| symbols.place(a),
        );
        *per.entry(place).or_default() += insns;
    }
    // Names only for the places that ran (demangling is the slow part).
    let mut named: HashMap<String, u64> = HashMap::new();
    for (place, insns) in per {
        *named.entry(symbols.describe(&place)).or_default() += insns;
    }
    let mut v: Vec<FunctionCost> = named
        .into_iter()
        .map(|(function, instructions)| FunctionCost {
            function,
            instructions,
        })
        .collect();
    v.sort_by(|a, b| {
        b.instructions
            .cmp(&a.instructions)
            .then_with(|| a.function.cmp(&b.function))
    });
    v.truncate(n);
    (v, total)
}

/// One MMIO site summed over the picked vCPUs ([`top_mmio_sites`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MmioCost {
    /// `write igb-mmio+0x3818 by igb_xmit_frame [igb]`: the access, the
    /// device region with the register's offset from `bars` (else the
    /// physical address), and the function that made it.
    pub site: String,
    /// Accesses over the picked vCPUs.
    pub accesses: u64,
}

/// The `n` MMIO sites with the most accesses over the vCPUs `pick` accepts.
/// `bars` gives the guest physical ranges of known BARs (start, length,
/// label): a site inside one is named by its offset there.
pub fn top_mmio_sites(
    profile: &Profile,
    pick: impl Fn(usize) -> bool,
    bars: &[(u64, u64, String)],
    symbols: &Symbols,
    n: usize,
) -> Vec<MmioCost> {
    let mut per: HashMap<String, u64> = HashMap::new();
    for m in &profile.mmio {
        let accesses: u64 = m
            .count
            .iter()
            .enumerate()
            .filter(|(i, _)| pick(*i))
            .map(|(_, x)| x)
            .sum();
        if accesses == 0 {
            continue;
        }
        let place = match m.phys {
            None => "[unplaced MMIO sites]".to_string(),
            Some(phys) => {
                let reg = bars
                    .iter()
                    .find(|(start, len, _)| phys >= *start && phys - start < *len)
                    .map_or_else(
                        || format!("{}@{phys:#x}", m.device),
                        |(start, _, label)| format!("{label}+{:#x}", phys - start),
                    );
                format!(
                    "{} {reg} by {}",
                    if m.write { "write" } else { "read" },
                    symbols.name(m.pc)
                )
            }
        };
        *per.entry(place).or_default() += accesses;
    }
    let mut v: Vec<MmioCost> = per
        .into_iter()
        .map(|(site, accesses)| MmioCost { site, accesses })
        .collect();
    v.sort_by(|a, b| {
        b.accesses
            .cmp(&a.accesses)
            .then_with(|| a.site.cmp(&b.site))
    });
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "pollnic-prof 1 seq 7 vcpus 2 slots 1024 used 3 unplaced 0\n\
        lost 0 0\n\
        lost 1 5\n\
        ffffffff81000010 100 0 40 0\n\
        401000 10 20 0 20\n\
        unplaced 1 0 0 0\n\
        mmio fe800818 w 401010 igb-mmio 0 3\n\
        mmio fe800818 w ffffffff81000020 igb-mmio 2 0\n\
        mmio-unplaced 0 1\n\
        end 7\n";

    #[test]
    fn a_whole_file_parses_and_a_torn_one_does_not() {
        let p = parse(FILE).unwrap();
        assert_eq!(p.seq, 7);
        assert_eq!(p.lost, vec![0, 5]);
        assert_eq!(p.blocks[&Some(0xffff_ffff_8100_0010)].marked, vec![40, 0]);
        assert_eq!(p.blocks[&None].all, vec![1, 0]);
        assert!(parse(&FILE.replace("end 7", "end 8")).is_none());
        assert!(parse(&FILE.replace("end 7\n", "")).is_none());
        assert!(parse(&FILE.replace("401000 10 20 0 20", "401000 10 20 0")).is_none());
        assert_eq!(p.mmio.len(), 3);
        assert_eq!(
            (p.mmio[0].phys, p.mmio[0].write, p.mmio[0].pc),
            (Some(0xfe80_0818), true, 0x40_1010)
        );
        assert_eq!(
            (p.mmio[2].phys, p.mmio[2].count.clone()),
            (None, vec![0, 1])
        );
        assert!(parse(&FILE.replace("igb-mmio 0 3", "igb-mmio 0")).is_none());
        assert!(parse(&FILE.replace("fe800818 w 401010", "fe800818 x 401010")).is_none());
    }

    #[test]
    fn mmio_sites_are_named_by_register_offset_and_function() {
        let p = parse(FILE).unwrap();
        let syms = Symbols {
            tables: vec![Arc::new(FileSymbols {
                segments: vec![],
                table: kallsyms("ffffffff81000000 T igb_xmit_frame\t[igb]\n".into()),
            })],
            user: vec![],
        };
        let bars = [(0xfe80_0000, 0x2_0000, "igb BAR0".to_string())];
        let top = top_mmio_sites(&p, |_| true, &bars, &syms, 10);
        let f = |site: &str, accesses| MmioCost {
            site: site.into(),
            accesses,
        };
        assert_eq!(
            top,
            vec![
                f("write igb BAR0+0x818 by [user]", 3),
                f("write igb BAR0+0x818 by igb_xmit_frame [igb]", 2),
                f("[unplaced MMIO sites]", 1)
            ]
        );
        assert_eq!(
            top_mmio_sites(&p, |v| v == 0, &[], &syms, 1),
            vec![f("write igb-mmio@0xfe800818 by igb_xmit_frame [igb]", 2)]
        );
    }

    #[test]
    fn blocks_add_up_per_function_over_the_picked_vcpus() {
        let p = parse(FILE).unwrap();
        assert_eq!(p.totals(|_| true), (131, 60));
        assert_eq!(p.totals(|v| v == 0), (111, 40));
        let syms = Symbols {
            tables: vec![Arc::new(FileSymbols {
                segments: vec![],
                table: kallsyms(
                    "ffffffff81000000 T igb_poll\nffffffff81000100 t napi_x\t[igb]\n".into(),
                ),
            })],
            user: vec![],
        };
        let (top, total) = top_functions(&p, |_| true, false, &syms, 10);
        assert_eq!(total, 131);
        let f = |function: &str, instructions| FunctionCost {
            function: function.into(),
            instructions,
        };
        assert_eq!(
            top,
            vec![
                f("igb_poll", 100),
                f("[user]", 30),
                f("[unplaced blocks]", 1)
            ]
        );
        let (top, total) = top_functions(&p, |v| v == 1, true, &syms, 1);
        assert_eq!((top, total), (vec![f("[user]", 20)], 20));
    }

    #[test]
    fn kernel_symbols_end_where_the_next_begins_and_modules_are_named() {
        let t = kallsyms(
            "ffffffff81000000 T a\nffffffff81000100 t b\t[igb]\nffffffff81000200 D data\n0000000000000000 T zero\n"
                .into(),
        );
        let at = |a: u64| t.find(a, 1 << 20).map(|i| t.name(i));
        assert_eq!(at(0xffff_ffff_8100_0050).as_deref(), Some("a"));
        assert_eq!(at(0xffff_ffff_8100_0150).as_deref(), Some("b [igb]"));
        assert_eq!(at(0xffff_ffff_8000_0000), None);
    }

    #[test]
    fn this_programs_own_functions_resolve_through_its_maps() {
        #[inline(never)]
        fn marker_fn() -> u64 {
            std::hint::black_box(42)
        }
        let syms = Symbols::load(&[std::process::id()]);
        let addr = marker_fn as *const () as usize as u64;
        let name = syms.name(addr);
        assert!(name.contains("marker_fn"), "{addr:#x} resolved to {name}");
    }

    #[test]
    fn maps_lines_give_the_executable_file_mappings() {
        let maps = "55d0c0000000-55d0c0100000 r--p 00000000 00:1f 123 /bin/x\n\
                    55d0c0100000-55d0c0200000 r-xp 00100000 00:1f 123 /bin/x\n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n\
                    7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0 [vdso]\n";
        assert_eq!(
            executable_mappings(maps),
            vec![
                (
                    0x55d0_c010_0000,
                    0x55d0_c020_0000,
                    0x10_0000,
                    "/bin/x".to_string()
                ),
                (0x7ffd_0010_0000, 0x7ffd_0010_2000, 0, "[vdso]".to_string())
            ]
        );
    }
}
