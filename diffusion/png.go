package diffusion

import (
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
)

// ToImage converts a [3, height, width] float image in [0, 1] to 8-bit RGB
// as diffusers' numpy_to_pil does: round(v·255), halves to even.
func ToImage(img []float32, width, height int) (*image.NRGBA, error) {
	if len(img) != 3*width*height {
		return nil, fmt.Errorf("diffusion: image of %d values, want 3×%d×%d", len(img), height, width)
	}
	out := image.NewNRGBA(image.Rect(0, 0, width, height))
	plane := width * height
	for p := range plane {
		for c := range 3 {
			v := math.RoundToEven(float64(img[c*plane+p] * 255))
			out.Pix[4*p+c] = uint8(min(max(v, 0), 255))
		}
		out.Pix[4*p+3] = 255
	}
	return out, nil
}

// EncodePNG writes a [3, height, width] float image in [0, 1] as PNG.
func EncodePNG(w io.Writer, img []float32, width, height int) error {
	im, err := ToImage(img, width, height)
	if err != nil {
		return err
	}
	return png.Encode(w, im)
}
