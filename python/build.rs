//! PyO3's configuration cfgs for this crate too (`Py_GIL_DISABLED` on a
//! free-threaded build, `Py_3_14`, ...), from the interpreter PyO3 builds
//! for.

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
