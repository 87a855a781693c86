package data

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"train/turbojpeg"
	"train/webp"
)

// DecodeRGB reads an image file (JPEG, PNG, WebP, BMP or TIFF, told by
// its first bytes, not its name) into h rows of w RGB pixels, as
// torchvision's default loader has it (PIL's
// Image.open(path).convert("RGB")):
//   - greyscale is copied into the three channels;
//   - 16-bit greyscale is clipped to 255, as Pillow's "I" to "RGB" does
//     (not scaled: a 16-bit PNG comes out mostly white there too);
//   - 16-bit colour keeps each sample's high byte;
//   - palettes are looked up and alpha is dropped, not composited.
//
// JPEGs go to libjpeg-turbo, Pillow's decoder, when it loads (package
// turbojpeg; JPEGDecoder says which), else to Go's image/jpeg; WebP to
// libwebp, Pillow's decoder too (package webp; without it a WebP file is
// an error saying so: golang.org/x/image/webp's lossy pixels were 12
// grey levels from Pillow's on average); BMP and TIFF to
// golang.org/x/image's decoders (lossless: Pillow's pixels). PPM and
// PGM, the rest of torchvision's extensions, are named as not read. A
// file that does not decode is an error naming it and the reason.
func DecodeRGB(path string) (pix []uint8, w, h int, err error) { return decodeRGBInto(nil, path) }

// decodeRGBInto is DecodeRGB into buf's storage when it is large enough
// (libjpeg-turbo's JPEGs; other files get a new slice).
func decodeRGBInto(buf []uint8, path string) (pix []uint8, w, h int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, 0, err
	}
	return decodeBytesInto(buf, b, path)
}

// decodeBytesInto is decodeRGBInto of a file's bytes, read already (a
// tar member); path names it in errors.
func decodeBytesInto(buf, b []uint8, path string) (pix []uint8, w, h int, err error) {
	var img image.Image
	switch {
	case len(b) == 0:
		return nil, 0, 0, fmt.Errorf("%s: an empty file, not an image", path)
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		img, err = png.Decode(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte{0xff, 0xd8}):
		if turbojpeg.Available() == nil {
			pix, w, h, err := turbojpeg.DecodeRGBInto(buf, b)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
			}
			return pix, w, h, nil
		}
		img, err = jpeg.Decode(bytes.NewReader(b))
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		if err := webp.Available(); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: a WebP file, which train reads through libwebp, and that did not load (%v): install Debian's libwebp7, or convert the images to PNG", path, err)
		}
		pix, w, h, err := webp.DecodeRGBInto(buf, b)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		return pix, w, h, nil
	case bytes.HasPrefix(b, []byte("BM")):
		img, err = bmp.Decode(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte("II*\x00")) || bytes.HasPrefix(b, []byte("MM\x00*")):
		img, err = tiff.Decode(bytes.NewReader(b))
	default:
		return nil, 0, 0, fmt.Errorf("%s: %s", path, notDecoded)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	r := img.Bounds()
	w, h = r.Dx(), r.Dy()
	if w == 0 || h == 0 {
		return nil, 0, 0, fmt.Errorf("%s: an image of %dx%d pixels", path, w, h)
	}
	pix = make([]uint8, 3*w*h)
	put := func(i int, r, g, b uint8) { pix[3*i], pix[3*i+1], pix[3*i+2] = r, g, b }
	for y := range h {
		for x := range w {
			i := y*w + x
			px, py := r.Min.X+x, r.Min.Y+y
			switch m := img.(type) {
			case *image.Gray:
				v := m.GrayAt(px, py).Y
				put(i, v, v, v)
			case *image.Gray16:
				v := uint8(min(m.Gray16At(px, py).Y, 255))
				put(i, v, v, v)
			case *image.NRGBA:
				c := m.NRGBAAt(px, py)
				put(i, c.R, c.G, c.B)
			case *image.NRGBA64:
				c := m.NRGBA64At(px, py)
				put(i, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8))
			case *image.RGBA:
				c := m.RGBAAt(px, py)
				put(i, c.R, c.G, c.B)
			case *image.RGBA64:
				c := m.RGBA64At(px, py)
				put(i, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8))
			case *image.Paletted:
				c := color.NRGBAModel.Convert(m.Palette[m.ColorIndexAt(px, py)]).(color.NRGBA)
				put(i, c.R, c.G, c.B)
			case *image.YCbCr:
				c := m.YCbCrAt(px, py)
				rr, gg, bb := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
				put(i, rr, gg, bb)
			case *image.CMYK:
				c := m.CMYKAt(px, py)
				rr, gg, bb := color.CMYKToRGB(c.C, c.M, c.Y, c.K)
				put(i, rr, gg, bb)
			default:
				return nil, 0, 0, errors.New(path + ": an image of an unexpected kind")
			}
		}
	}
	return pix, w, h, nil
}

// notDecoded ends the error of a file of no format train reads.
const notDecoded = "not a JPEG, PNG, WebP, BMP or TIFF file (train reads those; convert PPM and PGM images to PNG)"

// JPEGDecoder says what decodes JPEG files, for logs.
func JPEGDecoder() string {
	if err := turbojpeg.Available(); err != nil {
		return fmt.Sprintf("Go's image/jpeg (%v; its pixels differ from Pillow's by up to 43 grey levels on 4:2:0 files)", err)
	}
	return "libjpeg-turbo (" + turbojpeg.Library + ", Pillow's decoder)"
}
