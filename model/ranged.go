package model

import "github.com/cortiq/cortiq/tensor"

// RangeReader is an optional interface of Weights whose tensors are read
// from a file on demand (no memory mapping, as in the browser). It lets a
// backend size a tensor without reading it and load a large one in bounded
// row ranges, so the whole tensor and its converted copy never sit in
// memory at once.
type RangeReader interface {
	// TensorInfo returns the named tensor's codec and shape without
	// reading its data.
	TensorInfo(name string) (codec tensor.Codec, shape []int, ok bool)
	// ReadTensorRows reads rows [row0, row0+nrows) of the named tensor
	// (rows of the last dimension, encoded as stored) into dst, which must
	// hold exactly nrows rows.
	ReadTensorRows(name string, row0, nrows int, dst []byte) error
}
