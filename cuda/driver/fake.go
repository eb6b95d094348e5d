package driver

import (
	"fmt"
	"sort"
	"sync"
)

// Fake is a Device without a GPU: device memory is host memory, modules
// load whatever they are given, kernels run but compute nothing. Tests use
// it (usually under Faulty) to drive the backend's and the engine's error
// paths where there is no NVIDIA driver.
type Fake struct {
	mu        sync.Mutex
	info      Info
	next      Ptr
	allocs    []fakeAlloc // sorted by address
	Launches  int         // kernels launched (graph launches count theirs)
	capture   []fakeOp
	graphs    map[Graph][]fakeOp
	capturing bool

	// Dependent counts the programmatic dependent launches, captured ones
	// included.
	Dependent int
	// Kernels counts the lookups of each kernel name (Function).
	Kernels map[string]int
}

type fakeAlloc struct {
	at  Ptr
	mem []byte
}

type fakeOp func() error

// NewFake returns a fake device with totalMem bytes.
func NewFake(totalMem int64) *Fake {
	return &Fake{
		info:   Info{Name: "fake CUDA device", TotalMem: totalMem, DriverVersion: 13000, Major: 9, Minor: 0, SMs: 132, PDL: true},
		next:   0x10000000,
		graphs: map[Graph][]fakeOp{},
	}
}

func (f *Fake) Info() Info { return f.info }

func (f *Fake) used() int64 {
	var n int64
	for _, a := range f.allocs {
		n += int64(len(a.mem))
	}
	return n
}

func (f *Fake) MemInfo() (free, total int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info.TotalMem - f.used(), f.info.TotalMem, nil
}

func (f *Fake) Alloc(bytes int64) (Ptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes <= 0 {
		bytes = 1
	}
	if f.used()+bytes > f.info.TotalMem {
		return 0, &Error{Op: "cuMemAlloc", Code: ErrorOutOfMemory, Name: errorNames[ErrorOutOfMemory], Msg: "out of memory"}
	}
	p := f.next
	f.next += Ptr((bytes + 255) &^ 255)
	f.allocs = append(f.allocs, fakeAlloc{at: p, mem: make([]byte, bytes)})
	return p, nil
}

func (f *Fake) find(p Ptr, n int) ([]byte, error) {
	i := sort.Search(len(f.allocs), func(i int) bool { return f.allocs[i].at > p }) - 1
	if i < 0 || p-f.allocs[i].at+Ptr(n) > Ptr(len(f.allocs[i].mem)) {
		return nil, &Error{Op: "fake", Code: ErrorIllegalAddr, Name: errorNames[ErrorIllegalAddr], Msg: fmt.Sprintf("%d bytes at %#x", n, p)}
	}
	off := p - f.allocs[i].at
	return f.allocs[i].mem[off : off+Ptr(n)], nil
}

func (f *Fake) Free(p Ptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.allocs {
		if a.at == p {
			f.allocs = append(f.allocs[:i], f.allocs[i+1:]...)
			return nil
		}
	}
	if p == 0 {
		return nil
	}
	return &Error{Op: "cuMemFree", Code: ErrorIllegalAddr, Name: errorNames[ErrorIllegalAddr]}
}

func (f *Fake) Upload(dst Ptr, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(dst, len(src))
	if err != nil {
		return err
	}
	copy(m, src)
	return nil
}

func (f *Fake) Read(dst []byte, src Ptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, m)
	return nil
}

func (f *Fake) op(o fakeOp) error {
	if f.capturing {
		f.capture = append(f.capture, o)
		return nil
	}
	return o()
}

func (f *Fake) Copy(dst, src Ptr, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op(func() error {
		d, err := f.find(dst, int(n))
		if err != nil {
			return err
		}
		s, err := f.find(src, int(n))
		if err != nil {
			return err
		}
		copy(d, s)
		return nil
	})
}

func (f *Fake) Zero(dst Ptr, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.op(func() error {
		d, err := f.find(dst, int(n))
		if err != nil {
			return err
		}
		clear(d)
		return nil
	})
}

func (f *Fake) Load(image []byte) (Module, error) { return 1, nil }

func (f *Fake) Function(m Module, name string) (Func, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Kernels == nil {
		f.Kernels = map[string]int{}
	}
	f.Kernels[name]++
	return 1, nil
}

func (f *Fake) SetSharedLimit(Func, int) error { return nil }

func (f *Fake) Launch(fn Func, grid, block Dim3, shared int, args ...Arg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.capturing {
		f.Launches++
	}
	return nil
}

func (f *Fake) LaunchDependent(fn Func, grid, block Dim3, shared int, args ...Arg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.info.PDL {
		return fmt.Errorf("%w: %s", ErrNoPDL, f.info.Name)
	}
	if !f.capturing {
		f.Launches++
	}
	f.Dependent++
	return nil
}

// SetPDL sets what Info().PDL reports (a device without programmatic
// dependent launch when false).
func (f *Fake) SetPDL(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info.PDL = on
}

func (f *Fake) Sync() error { return nil }

func (f *Fake) BeginCapture() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capturing, f.capture = true, nil
	return nil
}

func (f *Fake) EndCapture() (Graph, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capturing = false
	g := Graph(len(f.graphs) + 1)
	f.graphs[g] = f.capture
	f.capture = nil
	return g, nil
}

func (f *Fake) LaunchGraph(g Graph) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Launches++
	for _, o := range f.graphs[g] {
		if err := o(); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fake) DestroyGraph(g Graph) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.graphs, g)
	return nil
}

func (f *Fake) Record() (Event, error)              { return 1, nil }
func (f *Fake) Elapsed(a, b Event) (float32, error) { return 0, nil }
func (f *Fake) DestroyEvent(Event) error            { return nil }
func (f *Fake) Close() error                        { return nil }
