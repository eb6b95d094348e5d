package importer

import (
	"fmt"

	"github.com/cortiq/cortiq/tensor"
)

// rowRange is the byte range of rows [row0, row0+nrows) of a tensor of
// codec c and shape, checked against dst's length.
func rowRange(c tensor.Codec, shape []int, row0, nrows, dst int) (int64, error) {
	t := tensor.Tensor{Shape: shape}
	rb, err := c.RowBytes(t.Cols())
	if err != nil {
		return 0, err
	}
	if row0 < 0 || nrows < 0 || row0 > t.Rows() || nrows > t.Rows()-row0 {
		return 0, fmt.Errorf("rows [%d, %d) outside shape %v", row0, row0+nrows, shape)
	}
	if int64(dst) != int64(nrows)*int64(rb) {
		return 0, fmt.Errorf("%d-byte buffer for %d rows of %d bytes", dst, nrows, rb)
	}
	return int64(row0) * int64(rb), nil
}
