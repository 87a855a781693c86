// The C half of package webp: libwebp opened with dlopen.
int webp_load(const char *path, char *err, int errlen);
// webp_info reads a WebP file's size; webp_decode decodes it into dst
// (w*h*3 bytes, RGB). Both return 0, or -1.
int webp_info(const unsigned char *buf, unsigned long n, int *w, int *h);
int webp_decode(const unsigned char *buf, unsigned long n, unsigned char *dst, unsigned long size, int stride);
