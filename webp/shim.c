#include "shim.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// decode.h's simple API (libwebp 0.4 and later): WebPGetInfo, and
// WebPDecodeRGBInto, which decodes with the library's defaults (fancy
// chroma upsampling), as the decoder Pillow calls does.
static int (*p_info)(const uint8_t *, size_t, int *, int *);
static uint8_t *(*p_decode)(const uint8_t *, size_t, uint8_t *, size_t, int);

int webp_load(const char *path, char *err, int errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	p_info = (int (*)(const uint8_t *, size_t, int *, int *))dlsym(h, "WebPGetInfo");
	p_decode = (uint8_t * (*)(const uint8_t *, size_t, uint8_t *, size_t, int)) dlsym(h, "WebPDecodeRGBInto");
	if (!p_info || !p_decode) {
		snprintf(err, errlen, "%s lacks WebPGetInfo and WebPDecodeRGBInto", path);
		dlclose(h);
		return -1;
	}
	return 0;
}

int webp_info(const unsigned char *buf, unsigned long n, int *w, int *h) { return p_info(buf, n, w, h) ? 0 : -1; }

int webp_decode(const unsigned char *buf, unsigned long n, unsigned char *dst, unsigned long size, int stride) {
	return p_decode(buf, n, dst, size, stride) ? 0 : -1;
}
