//! The XDP program of the `kernel-xdp-drop` row: two eBPF instructions that
//! return `XDP_DROP` for every frame, attached in the driver (native XDP),
//! with no socket behind it. It is the kernel's floor: the driver's receive
//! work and nothing else (the XDP paper's XDP_DROP test, Høiland-Jørgensen
//! et al., CoNEXT 2018, §4.1).
//!
//! The program is loaded and attached with libbpf (Debian `libbpf1`, which
//! `libxdp1` pulls in), loaded at run time as `xsk.rs` loads libxdp:
//! `bpf_prog_load` (`BPF_PROG_TYPE_XDP`, licence "GPL") and
//! `bpf_xdp_attach` / `bpf_xdp_detach` with `XDP_FLAGS_DRV_MODE` (libbpf
//! 1.x `bpf.h` and `libbpf.h`). No compiler is needed: the two
//! instructions are written out below (`include/uapi/linux/bpf.h`,
//! `BPF_ALU64 | BPF_MOV | BPF_K` and `BPF_JMP | BPF_EXIT`).

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

/// `struct bpf_insn`: opcode, dst (low nibble) and src registers, offset,
/// immediate.
#[repr(C)]
#[derive(Clone, Copy)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// `XDP_DROP` from `enum xdp_action`.
const XDP_DROP: i32 = 1;

/// `r0 = XDP_DROP; exit`.
const PROGRAM: [BpfInsn; 2] = [
    // BPF_ALU64 (0x07) | BPF_MOV (0xb0) | BPF_K (0x00), dst r0.
    BpfInsn {
        code: 0xb7,
        regs: 0,
        off: 0,
        imm: XDP_DROP,
    },
    // BPF_JMP (0x05) | BPF_EXIT (0x90).
    BpfInsn {
        code: 0x95,
        regs: 0,
        off: 0,
        imm: 0,
    },
];

/// `BPF_PROG_TYPE_XDP` from `enum bpf_prog_type`.
const BPF_PROG_TYPE_XDP: c_int = 6;
/// `XDP_FLAGS_DRV_MODE` (`if_link.h`): native XDP in the driver, never the
/// generic (skb) hook.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The shared object's name (Debian `libbpf1`).
const LIBBPF: &str = "libbpf.so.1";

type ProgLoad = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const c_char,
    *const BpfInsn,
    usize,
    *const c_void,
) -> c_int;
type XdpAttach = unsafe extern "C" fn(c_int, c_int, u32, *const c_void) -> c_int;
type XdpDetach = unsafe extern "C" fn(c_int, u32, *const c_void) -> c_int;

struct Libbpf {
    prog_load: ProgLoad,
    xdp_attach: XdpAttach,
    xdp_detach: XdpDetach,
}

fn libbpf() -> Result<&'static Libbpf, String> {
    static LIB: OnceLock<Result<Libbpf, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let name = CString::new(LIBBPF).expect("no NUL");
        // SAFETY: dlopen with a valid C string; the handle is kept for the
        // process's life (never closed).
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(format!(
                "{LIBBPF} could not be loaded: install Debian's libbpf1 (`apt-get install libbpf1`), or run via `cargo xtask compare`, which installs it"
            ));
        }
        let sym = |s: &str| -> Result<*mut c_void, String> {
            let c = CString::new(s).expect("no NUL");
            // SAFETY: dlsym on the open handle with a valid C string.
            let p = unsafe { libc::dlsym(h, c.as_ptr()) };
            if p.is_null() {
                Err(format!("{LIBBPF} has no {s} (libbpf 1.0 or later needed)"))
            } else {
                Ok(p)
            }
        };
        let (load, attach, detach) = (
            sym("bpf_prog_load")?,
            sym("bpf_xdp_attach")?,
            sym("bpf_xdp_detach")?,
        );
        // SAFETY: each symbol is the libbpf 1.x function of that name, whose
        // C signature the fn pointer types above spell out.
        unsafe {
            Ok(Libbpf {
                prog_load: std::mem::transmute::<*mut c_void, ProgLoad>(load),
                xdp_attach: std::mem::transmute::<*mut c_void, XdpAttach>(attach),
                xdp_detach: std::mem::transmute::<*mut c_void, XdpDetach>(detach),
            })
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// An XDP_DROP program attached to one interface in driver mode; detached
/// and closed on drop.
pub struct XdpDrop {
    ifindex: c_int,
    fd: c_int,
}

impl XdpDrop {
    /// Load the program and attach it to `ifindex` in driver mode.
    ///
    /// # Errors
    /// libbpf missing, or what the kernel refused (a driver without native
    /// XDP, an MTU it does not take XDP at), as text.
    pub fn attach(ifindex: u32) -> Result<XdpDrop, String> {
        let lib = libbpf()?;
        let (name, license) = (
            CString::new("pollnic_drop").expect("no NUL"),
            CString::new("GPL").expect("no NUL"),
        );
        // SAFETY: valid C strings and a 2-instruction array that outlive the
        // call; opts NULL (libbpf's defaults).
        let fd = unsafe {
            (lib.prog_load)(
                BPF_PROG_TYPE_XDP,
                name.as_ptr(),
                license.as_ptr(),
                PROGRAM.as_ptr(),
                PROGRAM.len(),
                std::ptr::null(),
            )
        };
        if fd < 0 {
            return Err(format!(
                "bpf_prog_load (XDP_DROP): {}",
                std::io::Error::from_raw_os_error(-fd)
            ));
        }
        let ifindex = ifindex as c_int;
        // SAFETY: `fd` is the program just loaded; opts NULL.
        let rc = unsafe { (lib.xdp_attach)(ifindex, fd, XDP_FLAGS_DRV_MODE, std::ptr::null()) };
        if rc < 0 {
            // SAFETY: `fd` is ours and not used again.
            unsafe { libc::close(fd) };
            return Err(format!(
                "bpf_xdp_attach (driver mode): {}: the driver has no native XDP at this MTU",
                std::io::Error::from_raw_os_error(-rc)
            ));
        }
        Ok(XdpDrop { ifindex, fd })
    }
}

impl Drop for XdpDrop {
    fn drop(&mut self) {
        if let Ok(lib) = libbpf() {
            // SAFETY: detaches whatever driver-mode program the interface
            // has (ours); opts NULL.
            unsafe { (lib.xdp_detach)(self.ifindex, XDP_FLAGS_DRV_MODE, std::ptr::null()) };
        }
        // SAFETY: `fd` is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}
