#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>

typedef int CUresult;
typedef int CUdevice;

static CUresult (*p_init)(unsigned int);
static CUresult (*p_count)(int *);
static CUresult (*p_get)(CUdevice *, int);
static CUresult (*p_name)(char *, int, CUdevice);
static CUresult (*p_attr)(int *, int, CUdevice);
static CUresult (*p_mem)(size_t *, CUdevice);
static CUresult (*p_errstr)(CUresult, const char **);

// CUdevice_attribute values (cuda.h).
enum { CC_MAJOR = 75, CC_MINOR = 76 };

int cu_load(const char *path, char *err, int errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	struct { void **p; const char *name; } syms[] = {
		{(void **)&p_init, "cuInit"},
		{(void **)&p_count, "cuDeviceGetCount"},
		{(void **)&p_get, "cuDeviceGet"},
		{(void **)&p_name, "cuDeviceGetName"},
		{(void **)&p_attr, "cuDeviceGetAttribute"},
		{(void **)&p_mem, "cuDeviceTotalMem_v2"},
		{(void **)&p_errstr, "cuGetErrorString"},
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].p = dlsym(h, syms[i].name);
		if (!*syms[i].p) {
			snprintf(err, errlen, "%s lacks %s (driver too old?)", path, syms[i].name);
			dlclose(h);
			return -1;
		}
	}
	return 0;
}

int cu_init(void) { return p_init(0); }
int cu_device_count(int *n) { return p_count(n); }

int cu_device_info(int ordinal, char *name, int namelen, int *major, int *minor, size_t *mem) {
	CUdevice d;
	CUresult r = p_get(&d, ordinal);
	if (r == 0) r = p_name(name, namelen, d);
	if (r == 0) r = p_attr(major, CC_MAJOR, d);
	if (r == 0) r = p_attr(minor, CC_MINOR, d);
	if (r == 0) r = p_mem(mem, d);
	return r;
}

const char *cu_error_string(int code) {
	const char *s = NULL;
	if (!p_errstr || p_errstr(code, &s) != 0 || !s) return "unknown CUDA error";
	return s;
}
