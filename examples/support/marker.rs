//! Region markers for the testbed's guest-work counter: 8-byte no-op
//! instructions that the counter's TCG plugin recognises when it translates
//! them (`xtask/plugin/pollnic_count.c`). [`begin`] opens a region on the
//! calling CPU, [`commit`] adds the instructions and bytes since `begin` to
//! that vCPU's marked counts, [`discard`] drops the region. A busy-polling
//! loop marks each burst: begin before `rx_burst`, discard when it returned
//! nothing, commit after the packets are handled; the marked count is then
//! the work the packets took, without the empty polls. On hardware, or in a
//! guest without the counter, each is one no-op (a multi-byte NOP, as
//! compilers pad with).

/// Emit the marker NOP with displacement `0x504e43<id>`.
macro_rules! marker {
    ($(#[$doc:meta])* $name:ident, $disp:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a NOP: its memory operand is never accessed, it reads
            // no register's value, writes nothing and leaves the flags;
            // `nomem`, `nostack` and `preserves_flags` say so to the compiler.
            unsafe {
                core::arch::asm!(
                    concat!("nop dword ptr [rax + rax*1 + ", $disp, "]"),
                    options(nomem, nostack, preserves_flags)
                )
            }
        }
    };
}

marker!(
    /// Open a region (`nopl 0x504e4301(%rax,%rax,1)`).
    begin,
    "0x504E4301"
);
marker!(
    /// Add what ran since [`begin`] to the marked counts (`nopl 0x504e4302(%rax,%rax,1)`).
    commit,
    "0x504E4302"
);
marker!(
    /// Drop the open region (`nopl 0x504e4303(%rax,%rax,1)`).
    discard,
    "0x504E4303"
);
marker!(
    /// [`commit`], for a region that handled exactly one packet: its counts
    /// are also kept apart, as the cost of a packet alone in its burst
    /// (`nopl 0x504e4304(%rax,%rax,1)`).
    commit_one,
    "0x504E4304"
);

marker!(
    /// Ask the plugin to write its per-block profile file now
    /// (`nopl 0x504e4305(%rax,%rax,1)`); the file is complete when this
    /// returns ([`crate::profile`]).
    profile,
    "0x504E4305"
);

marker!(
    /// Turn the counter's cache model on, in a guest booted with
    /// `--count-cache=marker` (`nopl 0x504e4306(%rax,%rax,1)`): from here it
    /// models the caches inside marked regions and watches every store for
    /// its byte shadow, which starts empty. Until then, and after
    /// [`cache_disarm`], the model costs nothing.
    cache_arm,
    "0x504E4306"
);
marker!(
    /// Turn the cache model off again and forget its byte shadow
    /// (`nopl 0x504e4307(%rax,%rax,1)`); the levels keep their lines.
    cache_disarm,
    "0x504E4307"
);

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The plugin matches these exact bytes: `0f 1f 84 00` and the
    /// displacement `NN 43 4e 50`.
    #[test]
    fn the_markers_are_the_bytes_the_plugin_looks_for() {
        let markers: [(fn(), u8); 7] = [
            (super::begin, 1),
            (super::commit, 2),
            (super::discard, 3),
            (super::commit_one, 4),
            (super::profile, 5),
            (super::cache_arm, 6),
            (super::cache_disarm, 7),
        ];
        for (f, id) in markers {
            let code = f as *const u8;
            // SAFETY: reading the first bytes of a function of this
            // program's own text, which is mapped readable; each marker
            // function is at least its 8-byte NOP and a return long, and
            // reading past its end stays inside the text segment.
            let bytes = unsafe { std::slice::from_raw_parts(code, 32) };
            let want = [0x0f, 0x1f, 0x84, 0x00, id, 0x43, 0x4e, 0x50];
            assert!(
                bytes.windows(8).any(|w| w == want),
                "no marker {id} in {bytes:02x?}"
            );
        }
    }
}
