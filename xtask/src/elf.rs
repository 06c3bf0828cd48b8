//! Just enough ELF to tell a static executable from a dynamic one.

use anyhow::{bail, Result};

const PT_INTERP: u32 = 3;

/// True if `image` is a 64-bit little-endian ELF without a program interpreter (`PT_INTERP`),
/// i.e. it runs in an initramfs that holds no dynamic loader (static-pie counts as static).
pub fn is_static(image: &[u8]) -> Result<bool> {
    if image.len() < 64 || &image[..4] != b"\x7fELF" {
        bail!("not an ELF file");
    }
    if image[4] != 2 || image[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| u16::from_le_bytes([image[o], image[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(image[0x20..0x28].try_into()?) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let Some(header) = image.get(at..at + 4) else {
            bail!("truncated ELF program headers");
        };
        let p_type = u32::from_le_bytes(header.try_into()?);
        if p_type == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_elf() {
        assert!(is_static(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn this_test_binary_is_dynamic_or_static_consistently() {
        // The test binary itself is a valid ELF; whatever it is, parsing must succeed.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(is_static(&me).is_ok());
    }

    #[test]
    fn sh_is_dynamic() {
        if let Ok(sh) = std::fs::read("/bin/sh") {
            if sh.starts_with(b"\x7fELF") {
                assert!(!is_static(&sh).unwrap());
            }
        }
    }
}
