//! The testbed counter's per-function profile, read from inside the guest.
//!
//! The TCG plugin (`xtask/plugin/pollnic_count.c`) keeps, per vCPU, the
//! instructions executed from each translated block's start address: all of
//! them, and those inside committed marked regions ([`crate::marker`]). The
//! [`crate::marker::profile`] marker makes it write them to
//! `$POLLNIC_COUNTS.prof` before the marker returns. [`Profile::take`] reads
//! that file; two of them, subtracted ([`Profile::since`]), are what ran in
//! between; [`Symbols`] turns block addresses into function names (the
//! guest kernel's from `/proc/kallsyms`, a process's from its
//! `/proc/PID/maps` and the ELF symbols of the files mapped there); and
//! [`top_functions`] adds the blocks up per function.
//!
//! A block is attributed to the function its first instruction is in (a
//! translated block never spans a call or a jump, so it rarely crosses a
//! function's end). Inlined code counts in the function it was inlined into.

use crate::counts::Counter;
use std::collections::HashMap;
use std::path::PathBuf;

/// One profile file: counts since boot.
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
    /// Ask the plugin for its profile and read it; `Ok(None)` outside a
    /// counting guest (no `$POLLNIC_COUNTS`).
    ///
    /// # Errors
    /// The file is missing, unreadable or malformed after the marker ran (a
    /// plugin started with `profile=0`, or an old plugin build).
    pub fn take() -> Result<Option<Profile>, String> {
        let Some(counter) = Counter::from_env() else {
            return Ok(None);
        };
        let mut path: PathBuf = counter.path().into();
        path.as_mut_os_string().push(".prof");
        let before = std::fs::read_to_string(&path).ok().and_then(|t| parse(&t)).map(|p| p.seq);
        crate::marker::profile();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading the profile {}: {e}", path.display()))?;
        let p = parse(&text)
            .ok_or_else(|| format!("{}: not a whole pollnic-prof file", path.display()))?;
        if before == Some(p.seq) {
            return Err(format!(
                "{}: the plugin did not rewrite the profile (seq {}): was it started with profile=0?",
                path.display(),
                p.seq
            ));
        }
        Ok(Some(p))
    }

    /// What ran between `earlier` and `self`, block by block.
    pub fn since(&self, earlier: &Profile) -> Profile {
        let sub = |a: &[u64], b: Option<&Vec<u64>>| -> Vec<u64> {
            a.iter()
                .enumerate()
                .map(|(i, x)| x.saturating_sub(b.and_then(|b| b.get(i)).copied().unwrap_or(0)))
                .collect()
        };
        let blocks = self
            .blocks
            .iter()
            .map(|(k, b)| {
                let e = earlier.blocks.get(k);
                let d = Block {
                    all: sub(&b.all, e.map(|e| &e.all)),
                    marked: sub(&b.marked, e.map(|e| &e.marked)),
                };
                (*k, d)
            })
            .filter(|(_, b)| b.all.iter().chain(&b.marked).any(|&x| x != 0))
            .collect();
        Profile {
            seq: self.seq,
            blocks,
            lost: sub(&self.lost, Some(&earlier.lost)),
        }
    }

    /// Instructions over the vCPUs `pick` accepts: (all, marked).
    pub fn totals(&self, pick: impl Fn(usize) -> bool) -> (u64, u64) {
        let sum = |v: &[u64]| -> u64 { v.iter().enumerate().filter(|(i, _)| pick(*i)).map(|(_, x)| x).sum() };
        self.blocks
            .values()
            .fold((0, 0), |(a, m), b| (a + sum(&b.all), m + sum(&b.marked)))
    }
}

/// Parse a profile file; `None` when it is torn or malformed.
pub fn parse(text: &str) -> Option<Profile> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let ["pollnic-prof", "1", "seq", seq, "vcpus", n, "slots", _, "used", _, "unplaced", _] = head[..] else {
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
    for line in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"end") {
            return (w.len() == 2 && w[1].parse::<u64>().ok()? == seq).then_some(Profile { seq, blocks, lost });
        }
        if w.len() != 1 + 2 * n {
            return None;
        }
        let key = match w[0] {
            "unplaced" => None,
            a => Some(u64::from_str_radix(a, 16).ok()?),
        };
        let v: Vec<u64> = w[1..].iter().map(|x| x.parse().ok()).collect::<Option<_>>()?;
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

/// Function symbols sorted by address: (start, size or 0, name).
#[derive(Clone, Debug, Default)]
struct Table(Vec<(u64, u64, String)>);

impl Table {
    fn sorted(mut v: Vec<(u64, u64, String)>) -> Table {
        v.sort_by_key(|s| s.0);
        v.dedup_by_key(|s| s.0);
        Table(v)
    }

    /// The symbol that holds `addr`: the last one starting at or below it,
    /// if `addr` is inside its size (or within `slack` when its size is 0).
    fn find(&self, addr: u64, slack: u64) -> Option<&str> {
        let i = self.0.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, size, name) = &self.0[i];
        let end = start.saturating_add(if *size > 0 { *size } else { slack });
        (addr < end).then_some(name.as_str())
    }
}

/// An ELF file's load segments, (file offset, size, virtual address) each, and its function symbols.
type FileSymbols = (Vec<(u64, u64, u64)>, Table);

/// An executable mapping of a process, with its file's symbols.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
    file: String,
    /// The file's load segments: (file offset, size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    symbols: Table,
}

/// Address-to-function names for the guest kernel and some processes.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    kernel: Table,
    user: Vec<Mapping>,
}

impl Symbols {
    /// The kernel's symbols (`/proc/kallsyms`, modules included, each named
    /// `function [module]`) and the executable mappings of the processes
    /// `pids` (their ELF `.symtab` when the file has one, else `.dynsym`:
    /// a stripped library's static functions then count under the exported
    /// function before them). Read them while the processes still run.
    /// What cannot be read is left out, and its addresses print as
    /// `[kernel]` or `[user]`.
    pub fn load(pids: &[u32]) -> Symbols {
        let kernel = std::fs::read_to_string("/proc/kallsyms")
            .map(|t| kallsyms(&t))
            .unwrap_or_default();
        let mut files: HashMap<String, FileSymbols> = HashMap::new();
        let mut user = Vec::new();
        for pid in pids {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                continue;
            };
            for (start, end, offset, file) in executable_mappings(&maps) {
                let (segments, symbols) = files
                    .entry(file.clone())
                    .or_insert_with(|| elf_symbols(&file).unwrap_or_default())
                    .clone();
                user.push(Mapping {
                    start,
                    end,
                    offset,
                    file,
                    segments,
                    symbols,
                });
            }
        }
        Symbols { kernel, user }
    }

    /// The function that holds `addr`.
    pub fn name(&self, addr: u64) -> String {
        if addr >= KERNEL_START {
            // kallsyms gives no sizes: a function ends where the next starts.
            return self.kernel.find(addr, 1 << 20).map_or("[kernel]".into(), str::to_string);
        }
        let Some(m) = self.user.iter().find(|m| m.start <= addr && addr < m.end) else {
            return "[user]".into();
        };
        let file_off = addr - m.start + m.offset;
        let vaddr = m
            .segments
            .iter()
            .find(|(off, size, _)| *off <= file_off && file_off < off + size)
            .map(|(off, _, va)| va + (file_off - off));
        let base = m.file.rsplit('/').next().unwrap_or(&m.file);
        match vaddr.and_then(|va| m.symbols.find(va, 0)) {
            Some(f) => f.to_string(),
            None => format!("[{base}]"),
        }
    }
}

/// `/proc/kallsyms`: text symbols (t, T, w, W) with their module.
fn kallsyms(text: &str) -> Table {
    let v = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let addr = u64::from_str_radix(w.next()?, 16).ok()?;
            let kind = w.next()?;
            let name = w.next()?;
            if !matches!(kind, "t" | "T" | "w" | "W") || addr == 0 {
                return None;
            }
            Some(match w.next() {
                Some(module) => (addr, 0, format!("{name} {module}")),
                None => (addr, 0, name.to_string()),
            })
        })
        .collect();
    Table::sorted(v)
}

/// The executable, file-backed lines of `/proc/PID/maps`: (start, end, offset, path).
fn executable_mappings(maps: &str) -> Vec<(u64, u64, u64, String)> {
    maps.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (range, perms, offset) = (w.next()?, w.next()?, w.next()?);
            let path = w.nth(2)?;
            if !perms.contains('x') || !path.starts_with('/') {
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

/// An ELF file's load segments and function symbols (demangled).
fn elf_symbols(path: &str) -> Option<FileSymbols> {
    use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
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
    let v = syms
        .into_iter()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            Some((s.address(), s.size(), format!("{:#}", rustc_demangle::demangle(name))))
        })
        .collect();
    Some((segments, Table::sorted(v)))
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
pub fn top_functions(
    profile: &Profile,
    pick: impl Fn(usize) -> bool,
    marked: bool,
    symbols: &Symbols,
    n: usize,
) -> (Vec<FunctionCost>, u64) {
    let mut per: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for (addr, b) in &profile.blocks {
        let v = if marked { &b.marked } else { &b.all };
        let insns: u64 = v.iter().enumerate().filter(|(i, _)| pick(*i)).map(|(_, x)| x).sum();
        if insns == 0 {
            continue;
        }
        total += insns;
        let name = addr.map_or_else(|| "[unplaced blocks]".to_string(), |a| symbols.name(a));
        *per.entry(name).or_default() += insns;
    }
    let mut v: Vec<FunctionCost> = per
        .into_iter()
        .map(|(function, instructions)| FunctionCost {
            function,
            instructions,
        })
        .collect();
    v.sort_by(|a, b| b.instructions.cmp(&a.instructions).then_with(|| a.function.cmp(&b.function)));
    v.truncate(n);
    (v, total)
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
    }

    #[test]
    fn the_difference_keeps_what_ran_between_and_sums_by_function() {
        let a = parse(FILE).unwrap();
        let b = parse(
            &FILE
                .replace("100 0 40 0", "160 0 70 0")
                .replace("401000 10 20 0 20", "401000 10 25 0 23")
                .replace("seq 7", "seq 9")
                .replace("end 7", "end 9"),
        )
        .unwrap();
        let d = b.since(&a);
        assert_eq!(d.blocks.len(), 2, "the unchanged block is gone: {d:?}");
        assert_eq!(d.totals(|_| true), (65, 33));
        assert_eq!(d.totals(|v| v == 0), (60, 30));
        let syms = Symbols {
            kernel: kallsyms("ffffffff81000000 T igb_poll\nffffffff81000100 t napi_x [igb]\n"),
            user: vec![],
        };
        let (top, total) = top_functions(&d, |_| true, false, &syms, 10);
        assert_eq!(total, 65);
        assert_eq!(
            top,
            vec![
                FunctionCost {
                    function: "igb_poll".into(),
                    instructions: 60
                },
                FunctionCost {
                    function: "[user]".into(),
                    instructions: 5
                },
            ]
        );
    }

    #[test]
    fn kernel_symbols_end_where_the_next_begins_and_modules_are_named() {
        let t = kallsyms(
            "ffffffff81000000 T a\nffffffff81000100 t b [igb]\nffffffff81000200 D data\n0000000000000000 T zero\n",
        );
        assert_eq!(t.find(0xffff_ffff_8100_0050, 1 << 20), Some("a"));
        assert_eq!(t.find(0xffff_ffff_8100_0150, 1 << 20), Some("b [igb]"));
        assert_eq!(t.find(0xffff_ffff_8000_0000, 1 << 20), None);
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
            vec![(0x55d0_c010_0000, 0x55d0_c020_0000, 0x10_0000, "/bin/x".to_string())]
        );
    }
}
