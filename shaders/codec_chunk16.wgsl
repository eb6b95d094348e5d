// fetchq and fetchc of a 16-element CHUNK for the padded-block codecs (see
// codec_blocks.wgsl): fetchc(e) is fetchq(e)·a − b with chunkscales (a, b).
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    var r: array<vec4<f32>, 4>;
    for (var i = 0u; i < 4u; i++) {
        r[i] = qv4(e + 4u * i, soff);
    }
    return r;
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let s = chunkscales(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 4u; i++) {
        r[i] = r[i] * s.x - vec4<f32>(s.y);
    }
    return r;
}
