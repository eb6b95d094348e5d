// The helpers both attention interfaces share (attention_io.wgsl,
// attention_prep_io.wgsl): the sink's share of a softmax, the cache row of
// a position, a tanh safe from overflow.
// sink_norm folds head h's sink into a softmax with running max m and sum
// l: it returns (scale, denominator) so that out = acc·scale / denominator,
// computed against max(m, sink) so that neither exponential overflows.
fn sink_norm(h: u32, m: f32, l: f32) -> vec2<f32> {
    if (p.has_sink == 0u) {
        return vec2<f32>(1.0, l);
    }
    let sk = sink_load(p.sink_off, h);
    let mm = max(m, sk);
    let c = exp(m - mm);
    return vec2<f32>(c, l * c + exp(sk - mm));
}

// kv_row is the cache row of position j.
fn kv_row(j: u32) -> u32 {
    if (p.kv_len == 0u) {
        return j;
    }
    return j % p.kv_len;
}

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}
