//! Lays out the release binary's code in the order `scripts/symbol-order/symbols.txt` gives: the
//! functions a session runs first, together, so an idle agentls maps the pages of the code it
//! runs and not those of the code around it (the kernel maps at least 64 KB around each page
//! fault). Without it an idle server maps most of its 16 MB of code; see
//! `scripts/symbol-order.sh`.
//!
//! Only where the linker is known to read the file: a release build for x86-64 Linux by a Rust
//! that links with its own lld there (1.90 and later) and no linker chosen by the user. Names the
//! file does not find (new code, another toolchain) are left where they are, silently.

use std::env;
use std::process::Command;

const ORDER: &str = "scripts/symbol-order/symbols.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=AGENTLS_LINK_MAP");
    if env::var("PROFILE").as_deref() != Ok("release") || !links_with_rust_lld() {
        return;
    }
    let order = format!(
        "{}/{ORDER}",
        env::var("CARGO_MANIFEST_DIR").unwrap_or_default()
    );
    println!("cargo:rustc-link-arg-bin=agentls=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bin=agentls=-Wl,--no-warn-symbol-ordering");
    // Relative relocations packed (DT_RELR): 6 KB to read at start instead of 750 KB, which
    // stayed mapped. The binary then needs glibc 2.36, which the loader checks by version.
    if glibc_minor().is_some_and(|minor| minor >= 36) {
        println!("cargo:rustc-link-arg-bin=agentls=-Wl,-z,pack-relative-relocs");
    }
    // Where each function went, for `scripts/symbol-order.sh` to name what it profiled.
    // Linked again whenever the map is missing (a fresh `target/symbol-order`).
    if let Some(map) = env::var_os("AGENTLS_LINK_MAP") {
        let map = map.to_string_lossy();
        println!("cargo:rerun-if-changed={map}");
        println!("cargo:rustc-link-arg-bin=agentls=-Wl,-Map={map}");
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
/// binary links to: the order applies only to a native x86-64 Linux build.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_minor() -> Option<u32> {
    // glibc's own, declared here rather than through a build dependency: a new dependency
    // would change the symbol names' hashes and so stale the order file.
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
