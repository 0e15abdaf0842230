//! The shared library's soname, and the worker executable's path fixed at
//! install time.

fn main() {
    // The shared object is installed as libmemplug.so.0.1.0 with the
    // links libmemplug.so.0 (its soname) and libmemplug.so.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemplug.so.0");
    // The `memplug` command that runs worker probes: scripts/install.sh
    // and scripts/deb.sh set MEMPLUG_INSTALL_WORKER to PREFIX/bin/memplug;
    // a build without it looks in /usr/local/bin.
    println!("cargo:rerun-if-env-changed=MEMPLUG_INSTALL_WORKER");
    let worker = std::env::var("MEMPLUG_INSTALL_WORKER").unwrap_or_else(|_| "/usr/local/bin/memplug".into());
    println!("cargo:rustc-env=MEMPLUG_C_WORKER={worker}");
}
