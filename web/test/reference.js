// erfc in f64 for the test's GELU reference: the Maclaurin series of erf for |z| < 3, the
// continued fraction of erfc beyond (both accurate to ~1e-15 relative there).
export function erfc(z) {
  if (Number.isNaN(z)) return NaN;
  if (z < 0) return 2 - erfc(-z);
  if (z < 3) {
    // erf(z) = 2/√π Σ (−1)ⁿ z^(2n+1) / (n! (2n+1))
    let term = z, sum = z;
    for (let n = 1; n < 200; n++) {
      term *= -z * z / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * sum;
  }
  if (z > 27) return 0;
  // erfc(z) = e^(−z²)/√π · 1/(z + 1/2/(z + 1/(z + 3/2/(z + ...)))), evaluated bottom-up
  let f = z;
  for (let n = 60; n >= 1; n--) f = z + (n / 2) / f;
  return Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
}
