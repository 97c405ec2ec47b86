//! How a Rust function becomes `NAME@@NODE` in the dynamic symbol table.
//!
//! rustc links a cdylib with its own anonymous version script (`{ global:
//! <#[no_mangle] names>; local: *; }`), which cannot be combined with a
//! script that assigns symbols to nodes. So `libibverbs.map` only defines
//! rdma-core 44's nodes, and every export is a plain (mangled, hence local)
//! Rust function given its public name and node by the assembler:
//! `.symver f, NAME@@NODE` on a `.globl f` creates the default-version alias
//! `NAME@@NODE`, which the version script's `local: *` does not hide
//! (verified: `objdump -T` then matches rdma-core's library).

/// `symver!(path::to::fn, ibv_name, "IBVERBS_1.1")`: exports the function
/// (or static) as `ibv_name@@IBVERBS_1.1`.
macro_rules! symver {
    ($f:path, $name:ident, $node:literal) => {
        #[cfg(not(test))]
        core::arch::global_asm!(
            ".globl {f}",
            concat!(".symver {f}, ", stringify!($name), "@@", $node),
            f = sym $f,
        );
        // The unit-test executable has no version nodes: only mark it used.
        #[cfg(test)]
        const _: () = {
            let _ = &$f;
        };
    };
}
pub(crate) use symver;
