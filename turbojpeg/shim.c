#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>

typedef void *tjhandle;
static tjhandle (*p_init)(void);
static int (*p_header)(tjhandle, const unsigned char *, unsigned long, int *, int *, int *, int *);
static int (*p_decode)(tjhandle, const unsigned char *, unsigned long, unsigned char *, int, int, int, int, int);
static char *(*p_errstr)(tjhandle);
static int (*p_destroy)(tjhandle);

// TJFLAG_STOPONWARNING (turbojpeg.h): a warning such as a truncated file
// stops decoding and is an error, as it is to Pillow.
enum { STOP_ON_WARNING = 8192 };

int tj_load(const char *path, char *err, int errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	p_init = (tjhandle (*)(void))dlsym(h, "tjInitDecompress");
	p_header = (int (*)(tjhandle, const unsigned char *, unsigned long, int *, int *, int *, int *))dlsym(h, "tjDecompressHeader3");
	p_decode = (int (*)(tjhandle, const unsigned char *, unsigned long, unsigned char *, int, int, int, int, int))dlsym(h, "tjDecompress2");
	p_errstr = (char *(*)(tjhandle))dlsym(h, "tjGetErrorStr2");
	p_destroy = (int (*)(tjhandle))dlsym(h, "tjDestroy");
	if (!p_init || !p_header || !p_decode || !p_errstr || !p_destroy) {
		snprintf(err, errlen, "%s lacks TurboJPEG 2's decompression functions", path);
		dlclose(h);
		return -1;
	}
	return 0;
}

static int fail(tjhandle t, char *err, int errlen) {
	snprintf(err, errlen, "%s", t ? p_errstr(t) : "tjInitDecompress failed");
	if (t)
		p_destroy(t);
	return -1;
}

int tj_header(const unsigned char *buf, unsigned long n, int *w, int *h, int *cs, char *err, int errlen) {
	tjhandle t = p_init();
	int sub;
	if (!t || p_header(t, buf, n, w, h, &sub, cs) != 0)
		return fail(t, err, errlen);
	p_destroy(t);
	return 0;
}

int tj_decode(const unsigned char *buf, unsigned long n, unsigned char *dst, int w, int h, int pf, char *err, int errlen) {
	tjhandle t = p_init();
	if (!t || p_decode(t, buf, n, dst, w, 0, h, pf, STOP_ON_WARNING) != 0)
		return fail(t, err, errlen);
	p_destroy(t);
	return 0;
}
