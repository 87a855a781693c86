// Package webp decodes WebP files with libwebp, opened at run time
// (dlopen), the decoder Pillow uses, with its defaults (fancy chroma
// upsampling), so the pixels are Pillow's. golang.org/x/image/webp's
// lossy pixels were 12.3 grey levels from Pillow's on average, up to 55
// (VP8's colours are limited-range BT.601, which libwebp scales and Go's
// YCbCr conversion does not). Without the library (Debian's libwebp7)
// Available is false and WebP files are not read.
package webp

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Library is the shared object opened (Debian's libwebp7).
const Library = "libwebp.so.7"

var (
	once    sync.Once
	loadErr error
)

// Available reports whether the library could be opened, and why not.
func Available() error {
	once.Do(func() {
		var buf [256]C.char
		p := C.CString(Library)
		defer C.free(unsafe.Pointer(p))
		if C.webp_load(p, &buf[0], C.int(len(buf))) != 0 {
			loadErr = fmt.Errorf("%s: %s", Library, C.GoString(&buf[0]))
		}
	})
	return loadErr
}

// DecodeRGBInto decodes a WebP file's bytes into h rows of w RGB pixels
// (alpha dropped, as Pillow's convert("RGB") drops it), into buf when it
// is large enough. Call Available first.
func DecodeRGBInto(buf []uint8, b []byte) (pix []uint8, w, h int, err error) {
	if len(b) == 0 {
		return nil, 0, 0, errors.New("an empty file")
	}
	src := (*C.uchar)(unsafe.Pointer(&b[0]))
	var cw, ch C.int
	if C.webp_info(src, C.ulong(len(b)), &cw, &ch) != 0 || cw <= 0 || ch <= 0 {
		return nil, 0, 0, errors.New("not a WebP file libwebp reads (WebPGetInfo failed)")
	}
	w, h = int(cw), int(ch)
	pix = buf[:0]
	if cap(buf) < 3*w*h {
		pix = make([]uint8, 3*w*h)
	}
	pix = pix[:3*w*h]
	if C.webp_decode(src, C.ulong(len(b)), (*C.uchar)(unsafe.Pointer(&pix[0])), C.ulong(len(pix)), C.int(3*w)) != 0 {
		return nil, 0, 0, errors.New("libwebp could not decode it (truncated or damaged?)")
	}
	return pix, w, h, nil
}
