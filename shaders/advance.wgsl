// Moves the step state on after a greedy step inside one submit: the next
// step starts where this one ended and records its pick one slot further.
// Dispatch (1, 1, 1).
@group(0) @binding(0) var<storage, read_write> step: array<u32>;

@compute @workgroup_size(1)
fn main() {
    step[0] = step[0] + step[1];
    step[4] = step[4] + 1u;
}
