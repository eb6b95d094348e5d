// ptxcheck.cu: loads kernels.ptx through the driver API (as cortiq's CUDA
// backend does: cuModuleLoadData, JIT to the device), looks up every .entry
// and prints its registers, local (spill) bytes and static shared bytes.
//   nvcc -o ptxcheck cuda/kernels/test/ptxcheck.cu -lcuda && ./ptxcheck cuda/kernels/kernels.ptx
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: ptxcheck kernels.ptx\n"); return 2; }
  std::ifstream f(argv[1]);
  std::stringstream ss; ss << f.rdbuf();
  std::string ptx = ss.str();
  cudaFree(0);  // primary context
  CUmodule mod;
  char log[16384] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log, (void*)(size_t)sizeof log};
  CUresult r = cuModuleLoadDataEx(&mod, ptx.c_str(), 2, opts, vals);
  if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); fprintf(stderr, "load: %s\n%s\n", s, log); return 1; }
  int n = 0, bad = 0;
  for (size_t p = ptx.find(".entry "); p != std::string::npos; p = ptx.find(".entry ", p + 1)) {
    size_t e = ptx.find('(', p);
    std::string name = ptx.substr(p + 7, e - p - 7);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.pop_back();
    CUfunction fn;
    if (cuModuleGetFunction(&fn, mod, name.c_str()) != CUDA_SUCCESS) { printf("MISSING %s\n", name.c_str()); bad++; continue; }
    int regs, local, shared;
    cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
    cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
    cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
    printf("%-28s regs %3d local %5d shared %5d\n", name.c_str(), regs, local, shared);
    n++;
  }
  printf("ptxcheck: %d kernels loaded, %d missing, PTX %zu bytes\n", n, bad, ptx.size());
  return bad ? 1 : 0;
}
