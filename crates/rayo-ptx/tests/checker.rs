//! The checker rejects broken programs (each test builds one on purpose) and accepts good ones.

use rayo_ptx::kernels::{GemmKernel, Kernel};
use rayo_ptx::ptx::*;

const F: PtxType = PtxType::F32;
const U: PtxType = PtxType::U32;

fn module(k: PtxKernel) -> PtxModule {
    PtxModule::new().version(8, 0).target("sm_90").address_size(64).kernel(k)
}

fn rejects(k: PtxKernel, needle: &str) {
    let err = module(k).check().expect_err("the checker accepted a broken program");
    let msg = err.to_string();
    assert!(msg.contains(needle), "expected {needle:?} in: {msg}");
}

/// A small correct kernel: out[tid] = x[tid] * 2 + 1.
fn good() -> PtxKernel {
    let mut k = PtxKernel::new("axpb").param("x", PtxType::U64).param("out", PtxType::U64);
    let x = k.ld_param_ptr("x");
    let out = k.ld_param_ptr("out");
    let tid = k.special(Special::TidX);
    let ax = k.elem_addr(x, tid, 4);
    let v = k.ld(Space::Global, F, Addr::reg(ax));
    let r = k.fma(F, v, 2.0f32, 1.0f32);
    let ao = k.elem_addr(out, tid, 4);
    k.st(Space::Global, F, Addr::reg(ao), r);
    k.ret();
    k
}

#[test]
fn api_md_example() {
    let module = PtxModule::new().version(8, 0).target("sm_90").address_size(64);
    let text = module.emit();
    assert!(text.contains(".version 8.0"));
    assert!(text.contains(".target sm_90"));
    assert!(text.contains(".address_size 64"));
    let kernel = GemmKernel::tiled(1024, 1024, 1024, 32);
    let ptx: String = kernel.emit_ptx();
    assert!(ptx.contains(".visible .entry gemm_tiled32("));
    assert!(ptx.contains("bar.sync 0;"));
}

#[test]
fn accepts_a_good_kernel_and_emits_it() {
    let m = module(good());
    m.check().unwrap();
    let text = m.emit_checked().unwrap();
    assert!(text.contains(".param .u64 x,"));
    assert!(text.contains("fma.rn.f32 %f1, %f0, 0f40000000, 0f3F800000;"), "{text}");
    assert!(text.contains("mad.wide.u32 %rd"), "{text}");
    assert!(text.contains(".reg .f32 %f<2>;"), "{text}");
}

#[test]
fn rejects_read_of_unwritten_register() {
    let mut k = good();
    let ghost = k.reg(F);
    let _ = k.add(F, ghost, 1.0f32);
    rejects(k, "read before any instruction writes it");
}

#[test]
fn rejects_register_of_another_kernel() {
    let mut other = PtxKernel::new("other");
    let foreign = other.mov(F, 1.0f32);
    let mut k = good();
    let _ = k.add(F, foreign, 1.0f32);
    rejects(k, "not declared by this kernel");
}

#[test]
fn rejects_float_op_on_integer_register() {
    let mut k = good();
    let i = k.mov(U, 3u32);
    let _ = k.add(F, i, 1.0f32);
    rejects(k, "has type .u32 where .f32 is needed");
}

#[test]
fn rejects_float_immediate_in_integer_op() {
    let mut k = good();
    let i = k.mov(U, 3u32);
    let _ = k.add(U, i, 1.5f32);
    rejects(k, "f32 immediate where .u32 is needed");
}

#[test]
fn rejects_wrong_destination_type() {
    let mut k = good();
    let a = k.mov(F, 1.0f32);
    let d = k.reg(U);
    k.push(Op::Bin { op: BinOp::Add, ty: F, d, a: a.into(), b: a.into() });
    rejects(k, "destination %r");
}

#[test]
fn rejects_setp_into_non_predicate() {
    let mut k = good();
    let a = k.mov(F, 1.0f32);
    let d = k.reg(F);
    k.push(Op::Setp { cmp: Cmp::Lt, ty: F, d, a: a.into(), b: a.into() });
    rejects(k, "where .pred is needed");
}

#[test]
fn rejects_guard_that_is_not_a_predicate() {
    let mut k = good();
    let a = k.mov(U, 1u32);
    k.push_guarded(a, false, Op::Ret);
    rejects(k, "guard");
}

#[test]
fn rejects_branch_to_missing_label_and_duplicate_labels() {
    let mut k = good();
    let nowhere = k.intern("$nowhere");
    k.bra(&nowhere);
    rejects(k, "undefined label $nowhere");
    let mut k = good();
    let l = k.intern("$L");
    k.label(&l);
    let again = k.intern("$L"); // the same text interns to the same name
    k.label(&again);
    rejects(k, "defined twice");
}

#[test]
fn rejects_unknown_or_mistyped_parameter() {
    let mut k = good();
    let _ = k.ld_param("nope");
    rejects(k, "unknown parameter nope");
    let mut k = good();
    let d = k.reg(U);
    let name = k.intern("x");
    k.push(Op::LdParam { ty: U, d, name });
    rejects(k, "parameter x is .u64 but is loaded as .u32");
}

#[test]
fn rejects_bad_addresses_and_widths() {
    let mut k = good();
    let f = k.mov(F, 0.0f32);
    let _ = k.ld(Space::Global, F, Addr::reg(f));
    rejects(k, "address register");
    let mut k = good();
    let u = k.mov(U, 0u32);
    let _ = k.ld(Space::Global, F, Addr::reg(u));
    rejects(k, "needs a 64-bit integer");
    let mut k = good();
    let p = k.ld_param_ptr("x");
    let _ = k.ld_v(Space::Global, PtxType::F64, 4, Addr::reg(p));
    rejects(k, ".v4.f64");
    let mut k = good();
    let p = k.ld_param_ptr("x");
    let _ = k.ld_v(Space::Global, F, 3, Addr::reg(p));
    rejects(k, ".v3.f32");
    let mut k = good();
    let missing = k.intern("missing");
    let _ = k.ld(Space::Shared, F, Addr::sym(missing, 0));
    rejects(k, "unknown shared symbol missing");
    // a shared array and a label of another kernel are not this kernel's, whatever their index
    let mut other = good();
    let theirs = other.shared_array("tile", F, 4, 4);
    let their_label = other.new_label("top");
    let mut k = good();
    let _ = k.shared_array("tile", F, 4, 4);
    let _ = k.ld(Space::Shared, F, Addr::sym(theirs, 0));
    rejects(k, "unknown shared symbol");
    let mut k = good();
    let _ = k.new_label("top");
    k.bra(&their_label);
    rejects(k, "branch to undefined label");
    let mut k = good();
    let x = k.mov(F, 1.0f32);
    let p = k.ld_param_ptr("x");
    k.st(Space::Param, F, Addr::reg(p), x);
    rejects(k, "cannot store to .param");
}

#[test]
fn rejects_mul_wide_into_narrow_register_and_bad_ops() {
    let mut k = good();
    let a = k.mov(U, 2u32);
    let d = k.reg(U);
    k.push(Op::Bin { op: BinOp::MulWide, ty: U, d, a: a.into(), b: a.into() });
    rejects(k, "where .u64 is needed");
    let mut k = good();
    let a = k.mov(F, 2.0f32);
    let _ = k.bin(BinOp::Shl, F, a, 1u32);
    rejects(k, "Shl is not defined for .f32");
    let mut k = good();
    let a = k.mov(U, 2u32);
    let _ = k.un(UnOp::Ex2, U, a);
    rejects(k, "Ex2 is not defined for .u32");
    let mut k = good();
    let p = k.ld_param_ptr("out");
    let _ = k.atom(Space::Global, AtomOp::Max, F, Addr::reg(p), 1.0f32);
    rejects(k, "atom Max is not defined for .f32");
}

#[test]
fn rejects_module_level_problems() {
    let m = PtxModule::new().target("gfx90a").kernel(good());
    assert!(m.check().unwrap_err().to_string().contains("not sm_NN"));
    let m = PtxModule::new().kernel(good()).kernel(good());
    assert!(m.check().unwrap_err().to_string().contains("two kernels named axpb"));
    let mut k = good();
    k.shared_array("big", F, 20_000, 4);
    rejects(k, "exceeds 49152");
}

#[test]
fn errors_name_the_instruction() {
    let mut k = good();
    let ghost = k.reg(F);
    let _ = k.add(F, ghost, 1.0f32);
    let e = module(k).check().unwrap_err();
    assert_eq!(e.kernel, "axpb");
    assert!(e.index.is_some());
    assert!(e.instruction.starts_with("add.rn.f32"), "{}", e.instruction);
}

#[test]
fn every_library_kernel_passes_the_checker() {
    for k in rayo_ptx::kernels::all_variants() {
        for sm in [80, 90] {
            k.check(sm).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
        }
    }
}

/// Generation is a pure function of the kernel value: the same text twice, the entry named as
/// the kernel, and the parameters declared in the order a launch pushes them. (Its speed is
/// measured by `rayo bench --backend cuda --ops ptxgen`, not asserted here.)
#[test]
fn generation_is_deterministic_checked_and_named_uniquely() {
    // Generation is a pure function of the kernel's parameters and the target: the same kernel
    // built twice gives byte-identical PTX that the checker accepts, its entry carries the
    // kernel's name, and two different variants never share a name (the name is the module
    // cache key). How fast kernels are generated is measured, not asserted:
    // `rayo bench --backend cuda --op ptxgen`.
    let first = rayo_ptx::kernels::all_variants();
    let second = rayo_ptx::kernels::all_variants();
    assert_eq!(first.len(), second.len());
    let mut names = std::collections::HashMap::new();
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.name(), b.name());
        for sm in [80, 90] {
            let text = a.module(sm).emit_checked().unwrap_or_else(|e| panic!("{} sm_{sm}: {e}", a.name()));
            assert_eq!(text, b.module(sm).emit_checked().unwrap(), "{} sm_{sm}: two generations differ", a.name());
            assert_eq!(text, a.emit_ptx_for(sm), "{} sm_{sm}: emit and emit_checked differ", a.name());
            assert!(text.contains(&format!(".target sm_{sm}")), "{} sm_{sm}", a.name());
            assert!(text.contains(&format!(".entry {}(", a.name())), "{}: entry not named after the kernel", a.name());
        }
        if let Some(prev) = names.insert(a.name(), a.emit_ptx()) {
            assert_eq!(prev, a.emit_ptx(), "two different kernels are both named {}", a.name());
        }
    }
}

/// The GEMM's shape reaches it as parameters (m, k, n), after the three pointers.
#[test]
fn gemm_takes_its_shape_as_parameters() {
    let g = GemmKernel::blocked_bk(128, 16, 128, 16).unwrap().build(90);
    let params: Vec<(&str, PtxType)> = g.params().iter().map(|p| (g.resolve(p.name), p.ty)).collect();
    let u64 = PtxType::U64;
    assert_eq!(params, [("a", u64), ("b", u64), ("c", u64), ("m", U), ("k", U), ("n", U)]);
}

#[test]
fn programmatic_dependent_launch_only_from_sm_90() {
    use rayo_ptx::kernels::{AttentionKernel, Kernel, QFormat, QMatvecKernel};
    // The decoding kernels wait for the previous grid on Hopper and not before.
    let q = QMatvecKernel::new(QFormat::Q4_1).per_block(true);
    let a = AttentionKernel::new(64, 1024, true).unwrap();
    for k in [&q as &dyn Kernel, &a] {
        let (p90, p80) = (k.emit_ptx_for(90), k.emit_ptx_for(80));
        assert!(p90.contains("griddepcontrol.wait;") && p90.contains("griddepcontrol.launch_dependents;"), "{}", k.name());
        assert!(!p80.contains("griddepcontrol"), "{}", k.name());
        assert!(k.build(90).waits_for_dependencies() && !k.build(80).waits_for_dependencies());
    }
    assert!(q.emit_ptx_for(90).contains("prefetch.global.L2"));
    // A kernel that waits cannot target an earlier chip.
    let mut k = good();
    k.grid_dep_sync(90);
    let e = PtxModule::new().target("sm_80").kernel(k).check().unwrap_err();
    assert!(e.to_string().contains("griddepcontrol needs sm_90"), "{e}");
}

/// A tensor map passed by value: declared `.param .align 64 .b8 name[128]`, its generic address
/// taken (`cvta.param`), never loaded as a scalar; a scalar's address is not taken.
#[test]
fn tensor_map_parameters_are_addressed_not_loaded() {
    let build = |load: bool, addr_of_scalar: bool| {
        let mut k = PtxKernel::new("tmap");
        k.add_tensor_map_param("map");
        k.add_param("n", U);
        let a = if load { k.ld_param("map") } else { k.param_address("map") };
        let n = if addr_of_scalar { k.param_address("n") } else { k.ld_param("n") };
        let _ = (a, n);
        k.ret();
        k
    };
    let m = module(build(false, false));
    m.check().unwrap();
    let text = m.emit_checked().unwrap();
    assert!(text.contains(".param .align 64 .b8 map[128],"), "{text}");
    assert!(text.contains("mov.b64 %rd0, map;\n\tcvta.param.u64 %rd0, %rd0;"), "{text}");
    rejects(build(true, false), "take its address");
    rejects(build(false, true), "is a scalar");
}
