package driver

import "sync"

// Faulty wraps a Device and injects failures: a refused module load or
// allocation, a failed n-th kernel launch, a device lost after n launches
// (every call fails from then on, as a GPU that fell off the bus does).
type Faulty struct {
	Device
	// RefuseLoad fails every module load (a PTX newer than the driver).
	RefuseLoad bool
	// AllocLimit > 0 fails allocations past that many bytes in all.
	AllocLimit int64
	// FailLaunch > 0 fails that launch (1-based, counting graph launches
	// as one) with CUDA_ERROR_LAUNCH_FAILED; later launches work.
	FailLaunch int
	// LoseAfter > 0 loses the device at that launch: it and every later
	// call fail with CUDA_ERROR_DEVICE_UNAVAILABLE.
	LoseAfter int

	mu        sync.Mutex
	launches  int
	allocated int64
	lost      bool
}

func lostErr(op string) error {
	return &Error{Op: op, Code: ErrorDeviceUnavail, Name: errorNames[ErrorDeviceUnavail], Msg: "injected: device lost"}
}

// Lost reports whether the injected loss happened.
func (f *Faulty) Lost() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

func (f *Faulty) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost {
		return lostErr(op)
	}
	return nil
}

// launch counts a launch and decides its fate.
func (f *Faulty) launch(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost {
		return lostErr(op)
	}
	f.launches++
	if f.LoseAfter > 0 && f.launches >= f.LoseAfter {
		f.lost = true
		return lostErr(op)
	}
	if f.FailLaunch > 0 && f.launches == f.FailLaunch {
		return &Error{Op: op, Code: ErrorLaunchFailed, Name: errorNames[ErrorLaunchFailed], Msg: "injected: launch failed"}
	}
	return nil
}

func (f *Faulty) MemInfo() (free, total int64, err error) {
	if err := f.check("cuMemGetInfo"); err != nil {
		return 0, 0, err
	}
	return f.Device.MemInfo()
}

func (f *Faulty) Alloc(n int64) (Ptr, error) {
	if err := f.check("cuMemAlloc"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	over := f.AllocLimit > 0 && f.allocated+n > f.AllocLimit
	if !over {
		f.allocated += n
	}
	f.mu.Unlock()
	if over {
		return 0, &Error{Op: "cuMemAlloc", Code: ErrorOutOfMemory, Name: errorNames[ErrorOutOfMemory], Msg: "injected: out of memory"}
	}
	return f.Device.Alloc(n)
}

func (f *Faulty) Upload(dst Ptr, src []byte) error {
	if err := f.check("cuMemcpyHtoD"); err != nil {
		return err
	}
	return f.Device.Upload(dst, src)
}

func (f *Faulty) Read(dst []byte, src Ptr) error {
	if err := f.check("cuMemcpyDtoH"); err != nil {
		return err
	}
	return f.Device.Read(dst, src)
}

func (f *Faulty) Copy(dst, src Ptr, n int64) error {
	if err := f.check("cuMemcpyDtoD"); err != nil {
		return err
	}
	return f.Device.Copy(dst, src, n)
}

func (f *Faulty) Zero(dst Ptr, n int64) error {
	if err := f.check("cuMemsetD8"); err != nil {
		return err
	}
	return f.Device.Zero(dst, n)
}

func (f *Faulty) Load(image []byte) (Module, error) {
	if err := f.check("cuModuleLoadData"); err != nil {
		return 0, err
	}
	if f.RefuseLoad {
		return 0, &Error{Op: "cuModuleLoadData", Code: ErrorInvalidImage, Name: errorNames[ErrorInvalidImage], Msg: "injected: image refused"}
	}
	return f.Device.Load(image)
}

func (f *Faulty) Launch(fn Func, grid, block Dim3, shared int, args ...Arg) error {
	if err := f.launch("cuLaunchKernel"); err != nil {
		return err
	}
	return f.Device.Launch(fn, grid, block, shared, args...)
}

func (f *Faulty) LaunchDependent(fn Func, grid, block Dim3, shared int, args ...Arg) error {
	if err := f.launch("cuLaunchKernelEx"); err != nil {
		return err
	}
	return f.Device.LaunchDependent(fn, grid, block, shared, args...)
}

func (f *Faulty) LaunchGraph(g Graph) error {
	if err := f.launch("cuGraphLaunch"); err != nil {
		return err
	}
	return f.Device.LaunchGraph(g)
}

func (f *Faulty) Sync() error {
	if err := f.check("cuStreamSynchronize"); err != nil {
		return err
	}
	return f.Device.Sync()
}

func (f *Faulty) BeginCapture() error {
	if err := f.check("cuStreamBeginCapture"); err != nil {
		return err
	}
	return f.Device.BeginCapture()
}

func (f *Faulty) EndCapture() (Graph, error) {
	if err := f.check("cuStreamEndCapture"); err != nil {
		return 0, err
	}
	return f.Device.EndCapture()
}
