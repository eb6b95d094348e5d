package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestRangeReader reads row ranges of an unmapped GGUF and CMF model and
// compares them with the whole tensors; bad ranges are errors.
func TestRangeReader(t *testing.T) {
	dir := t.TempDir()
	gpath := filepath.Join(dir, "m.gguf")
	if err := synth.Write(gpath, synth.Shapes["tiny"], tensor.Q4_0); err != nil {
		t.Fatal(err)
	}
	ref, err := FromGGUF(gpath)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	cpath := filepath.Join(dir, "m.cmf")
	if err := writer.SaveCMF(ref, cpath, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{gpath, cpath} {
		fd, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		st, _ := fd.Stat()
		var m *model.Model
		if path == gpath {
			f, err := gguf.Read(fd, st.Size(), path)
			if err != nil {
				t.Fatal(err)
			}
			m, err = FromGGUFFile(f)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			f, err := cmf.Read(fd, st.Size(), path)
			if err != nil {
				t.Fatal(err)
			}
			m, err = FromCMFFile(f)
			if err != nil {
				t.Fatal(err)
			}
		}
		rr, ok := m.Weights.(model.RangeReader)
		if !ok {
			t.Fatalf("%s: lazy weights are not a model.RangeReader", path)
		}
		for _, name := range []string{model.TokenEmbd, model.LayerTensor(1, model.FFNDown)} {
			whole, ok := m.Weights.Tensor(name)
			if !ok {
				t.Fatalf("%s: no %s", path, name)
			}
			c, shape, ok := rr.TensorInfo(name)
			if !ok || c != whole.Codec || len(shape) != len(whole.Shape) || shape[0] != whole.Shape[0] {
				t.Fatalf("%s: %s info %s %v, tensor %s %v", path, name, c, shape, whole.Codec, whole.Shape)
			}
			rb, _ := c.RowBytes(whole.Cols())
			row0, n := 3, 5
			dst := make([]byte, n*rb)
			if err := rr.ReadTensorRows(name, row0, n, dst); err != nil {
				t.Fatalf("%s: %s: %v", path, name, err)
			}
			if !bytes.Equal(dst, whole.Data[row0*rb:(row0+n)*rb]) {
				t.Errorf("%s: %s rows [%d, %d) differ from the whole tensor's", path, name, row0, row0+n)
			}
			rows := whole.Rows()
			for _, bad := range [][2]int{{-1, 1}, {rows, 1}, {rows - 1, 2}, {0, -1}} {
				if err := rr.ReadTensorRows(name, bad[0], bad[1], make([]byte, max(bad[1], 0)*rb)); err == nil {
					t.Errorf("%s: %s rows [%d, +%d) gave no error", path, name, bad[0], bad[1])
				}
			}
			if err := rr.ReadTensorRows(name, 0, 1, make([]byte, rb+1)); err == nil {
				t.Errorf("%s: %s: wrong buffer size gave no error", path, name)
			}
		}
		if _, _, ok := rr.TensorInfo("nope"); ok {
			t.Errorf("%s: TensorInfo of a missing tensor", path)
		}
		if err := rr.ReadTensorRows("nope", 0, 1, nil); err == nil {
			t.Errorf("%s: ReadTensorRows of a missing tensor gave no error", path)
		}
	}
}

// TestReadRangeMapped checks gguf/cmf File.ReadRange on memory-mapped files.
func TestReadRangeMapped(t *testing.T) {
	dir := t.TempDir()
	gpath := filepath.Join(dir, "m.gguf")
	if err := synth.Write(gpath, synth.Shapes["tiny"], tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(gpath)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	whole, err := g.RawData(model.TokenEmbd)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 100)
	if err := g.ReadRange(model.TokenEmbd, 34, dst); err != nil || !bytes.Equal(dst, whole[34:134]) {
		t.Errorf("gguf ReadRange: %v", err)
	}
	if err := g.ReadRange(model.TokenEmbd, int64(len(whole))-10, dst); err == nil {
		t.Error("gguf ReadRange past the tensor gave no error")
	}
	m, err := FromGGUF(gpath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cpath := filepath.Join(dir, "m.cmf")
	if err := writer.SaveCMF(m, cpath, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	c, err := cmf.Open(cpath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ct, err := c.Tensor(model.TokenEmbd)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReadRange(model.TokenEmbd, 34, dst); err != nil || !bytes.Equal(dst, ct.Data[34:134]) {
		t.Errorf("cmf ReadRange: %v", err)
	}
	if err := c.ReadRange(model.TokenEmbd, -1, dst); err == nil {
		t.Error("cmf ReadRange at a negative offset gave no error")
	}
}
