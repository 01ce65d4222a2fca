//! Packs the release binary's relative relocations (DT_RELR): the loader reads 6 KB of them at
//! each start instead of 750 KB, which stayed mapped. The binary then needs glibc 2.36, so only
//! where the host's glibc is that new, and only where the linker is known to take the flag: a
//! release build for x86-64 Linux by a Rust that links with its own lld there (1.90 and later)
//! and no linker chosen by the user. Anywhere else the build is left as it is.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if env::var("PROFILE").as_deref() != Ok("release") || !links_with_rust_lld() {
        return;
    }
    if glibc_minor().is_some_and(|minor| minor >= 36) {
        println!("cargo:rustc-link-arg-bin=agentls=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the final link is rustc's default for x86-64 Linux: its own lld.
fn links_with_rust_lld() -> bool {
    let target = env::var("TARGET").unwrap_or_default();
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    target == "x86_64-unknown-linux-gnu"
        && env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("link-self-contained")
        && !flags.contains("fuse-ld")
        && rustc_minor().is_some_and(|minor| minor >= 90)
}

/// The minor version of the C library this machine runs (`2.36` → 36), which is the one the
/// binary links to (a native build).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_minor() -> Option<u32> {
    unsafe extern "C" {
        fn gnu_get_libc_version() -> *const std::ffi::c_char;
    }
    // SAFETY: glibc returns a pointer to a static, NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    let (major, minor) = version.to_str().ok()?.split_once('.')?;
    (major == "2").then_some(())?;
    minor.split('.').next()?.parse().ok()
}

/// Not a glibc host: no packed relocations.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_minor() -> Option<u32> {
    None
}

/// The minor version of the compiler building this (`rustc 1.95.0 …` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let version = String::from_utf8(out.stdout).ok()?;
    version
        .split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
