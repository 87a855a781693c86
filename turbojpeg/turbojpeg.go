// Package turbojpeg decodes JPEG files with libjpeg-turbo's TurboJPEG
// API, opened at run time (dlopen), the way Pillow decodes them: the
// same library with its defaults (the accurate integer IDCT and "fancy"
// smoothed chroma upsampling), so the pixels are Pillow's. Go's
// image/jpeg differs by up to 43 grey levels on 4:2:0 files
// (TestPILDecode), which is why this package exists. Without the
// library (Debian's libturbojpeg0) Available is false and the caller
// falls back to image/jpeg.
package turbojpeg

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Library is the shared object opened (Debian's libturbojpeg0).
const Library = "libturbojpeg.so.0"

// Colour spaces (TJCS_*) and pixel formats (TJPF_*) of turbojpeg.h.
const (
	csGray = 2
	csCMYK = 3
	csYCCK = 4
	pfRGB  = 0
	pfGray = 6
	pfCMYK = 11
)

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
		if C.tj_load(p, &buf[0], C.int(len(buf))) != 0 {
			loadErr = fmt.Errorf("%s: %s", Library, C.GoString(&buf[0]))
		}
	})
	return loadErr
}

// DecodeRGB decodes a JPEG file's bytes into h rows of w RGB pixels, as
// Pillow's Image.open(f).convert("RGB") has them: greyscale copied into
// the three channels, CMYK (Adobe's inverted convention, as Pillow
// assumes) converted with Pillow's formula. Call Available first.
func DecodeRGB(b []byte) (pix []uint8, w, h int, err error) { return DecodeRGBInto(nil, b) }

// DecodeRGBInto is DecodeRGB into buf when it is large enough (a decoding
// loop reuses one buffer rather than allocating and clearing one per
// image); pix is buf's storage or a new slice.
func DecodeRGBInto(buf []uint8, b []byte) (pix []uint8, w, h int, err error) {
	if len(b) == 0 {
		return nil, 0, 0, fmt.Errorf("an empty file")
	}
	var errb [256]C.char
	var cw, ch, cs C.int
	src := (*C.uchar)(unsafe.Pointer(&b[0]))
	if C.tj_header(src, C.ulong(len(b)), &cw, &ch, &cs, &errb[0], C.int(len(errb))) != 0 {
		return nil, 0, 0, fmt.Errorf("%s", C.GoString(&errb[0]))
	}
	w, h = int(cw), int(ch)
	pf, channels := pfRGB, 3
	switch cs {
	case csGray:
		pf, channels = pfGray, 1
	case csCMYK, csYCCK:
		pf, channels = pfCMYK, 4
	}
	raw := buf[:0]
	if cap(buf) < w*h*channels || channels != 3 {
		raw = make([]uint8, w*h*channels)
	}
	raw = raw[:w*h*channels]
	if C.tj_decode(src, C.ulong(len(b)), (*C.uchar)(unsafe.Pointer(&raw[0])), cw, ch, C.int(pf), &errb[0], C.int(len(errb))) != 0 {
		return nil, 0, 0, fmt.Errorf("%s", C.GoString(&errb[0]))
	}
	switch channels {
	case 3:
		return raw, w, h, nil
	case 1:
		pix = make([]uint8, 3*w*h)
		for i, v := range raw {
			pix[3*i], pix[3*i+1], pix[3*i+2] = v, v, v
		}
		return pix, w, h, nil
	}
	pix = make([]uint8, 3*w*h)
	for i := range w * h {
		// Adobe's CMYK JPEGs store inverted values; Pillow reads them as
		// "CMYK;I" and TurboJPEG hands them over as stored, so 255 - raw
		// is Pillow's CMYK, and then its cmyk2rgb: each channel
		// nk - c*nk/255 with nk = 255 - k, with its rounding.
		nk := int(raw[4*i+3]) // 255 - Pillow's K
		for c := range 3 {
			v := 255 - int(raw[4*i+c]) // Pillow's C, M or Y
			t := v*nk + 128
			pix[3*i+c] = uint8(max(0, min(255, nk-((t>>8)+t)>>8)))
		}
	}
	return pix, w, h, nil
}
