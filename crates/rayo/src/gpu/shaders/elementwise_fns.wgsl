// Element-wise functions shared by every generated element-wise kernel (single ops and fused
// chains). Written over the type alias T, which the generator sets to f32 or, for lengths that
// are a multiple of 4, vec4<f32> (16-byte loads and stores). Each stays finite where the f64
// reference is finite.

fn op_sigmoid(x: T) -> T {
    // exp of a non-positive argument only: no overflow for large |x|.
    let e = exp(-abs(x));
    let s = 1.0 / (1.0 + e);
    return select(e * s, s, x >= T(0.0));
}

fn op_tanh(x: T) -> T {
    let e = exp(-2.0 * abs(x));
    let t = (1.0 - e) / (1.0 + e);
    // Small |x|: the quotient loses relative precision; tanh(x) ~ x - x^3/3 + 2x^5/15.
    let x2 = x * x;
    let small = x * (1.0 + x2 * (-0.33333334 + x2 * 0.13333334));
    return select(sign(x) * t, small, abs(x) < T(0.0625));
}

fn op_swish(x: T) -> T {
    return x * op_sigmoid(x);
}

fn op_elu(x: T, alpha: f32) -> T {
    // expm1 for small negative x: exp(x) - 1 cancels.
    let em1 = select(exp(x) - 1.0, x * (1.0 + x * (0.5 + x * (0.16666667 + x * 0.041666668))), x > T(-0.03125));
    return select(alpha * em1, x, x > T(0.0));
}

fn op_leaky_relu(x: T, alpha: f32) -> T {
    return select(alpha * x, x, x > T(0.0));
}

fn op_relu(x: T) -> T {
    return select(T(0.0), x, x > T(0.0));
}

// erfc(z) for z >= 0 (Numerical Recipes' erfcc, fractional error < 1.2e-7).
fn erfc_pos(z: T) -> T {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(p);
}

// Exact GELU: x * Phi(x) = x * erfc(-x / sqrt 2) / 2.
fn op_gelu(x: T) -> T {
    let z = x * 0.70710678;
    let c = erfc_pos(abs(z));
    let phi = select(1.0 - 0.5 * c, 0.5 * c, z < T(0.0));
    return x * phi;
}
