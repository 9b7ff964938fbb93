//! Build script: compiles the small C shim in `csrc/`.
//!
//! `csrc/ldouble.c` exists because INCRBYFLOAT and HINCRBYFLOAT must compute and print in C
//! `long double` exactly as Redis does, and Rust has no long double type.

fn main() {
    println!("cargo:rerun-if-changed=csrc/ldouble.c");
    cc::Build::new().file("csrc/ldouble.c").warnings(true).compile("atoll_ldouble");
}
