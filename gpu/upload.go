package gpu

import "fmt"

// uploadChunk bounds one WriteBuffer so the driver's staging copy of a
// multi-GiB model never needs a matching host allocation.
const uploadChunk = 64 << 20

// FlushEvery bounds the bytes written but not yet submitted: the driver
// stages every WriteBuffer until the next submit, so loading a large model
// without flushing holds a second copy of it (and crashed lavapipe past a
// few hundred MiB).
const FlushEvery = 128 << 20

// Upload writes data into a new storage buffer, in chunks, submitting
// whenever FlushEvery bytes are staged (see Staged).
func (d *Device) Upload(label string, data []byte) (*Buffer, error) {
	buf, err := d.NewStorage(label, uint64(len(data)))
	if err != nil {
		return nil, err
	}
	for off := 0; off < len(data); off += uploadChunk {
		end := min(off+uploadChunk, len(data))
		if err := d.Write(buf, uint64(off), data[off:end]); err != nil {
			buf.Release()
			return nil, fmt.Errorf("webgpu: upload %s: %w", label, err)
		}
		d.pending += int64(end - off)
		if d.pending >= FlushEvery {
			if err := d.Flush(); err != nil {
				buf.Release()
				return nil, fmt.Errorf("webgpu: upload %s: %w", label, err)
			}
		}
	}
	return buf, nil
}

// Staged counts n bytes just written for a load and submits them (Flush)
// once FlushEvery bytes wait: the driver stages every write until the next
// submit, so a load that never submits holds a second copy of the model.
func (d *Device) Staged(n int) error {
	d.pending += int64(n)
	if d.pending >= FlushEvery {
		return d.Flush()
	}
	return nil
}
