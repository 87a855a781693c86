// The C half of package turbojpeg: libturbojpeg opened with dlopen.
int tj_load(const char *path, char *err, int errlen);
// tj_header reads a JPEG's size and colour space (TJCS_*); tj_decode
// decodes it into dst (w*h*channels bytes) in pixel format pf (TJPF_*).
// Both return 0, or -1 with the library's message in err; a warning (a
// truncated file) is an error too.
int tj_header(const unsigned char *buf, unsigned long n, int *w, int *h, int *cs, char *err, int errlen);
int tj_decode(const unsigned char *buf, unsigned long n, unsigned char *dst, int w, int h, int pf, char *err, int errlen);
