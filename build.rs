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
    if !links_with_rust_lld() || env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let order = format!(
        "{}/{ORDER}",
        env::var("CARGO_MANIFEST_DIR").unwrap_or_default()
    );
    println!("cargo:rustc-link-arg-bin=agentls=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bin=agentls=-Wl,--no-warn-symbol-ordering");
    // Where each function went, for `scripts/symbol-order.sh` to name what it profiled.
    if let Some(map) = env::var_os("AGENTLS_LINK_MAP") {
        let map = map.to_string_lossy();
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
