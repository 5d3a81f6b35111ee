package bodies

import "io"

// Capped reads at most N bytes of R and then fails with ErrTooLarge: a
// body larger than its bound (a multipart upload, an upstream's answer)
// is an error rather than memory or disk spent on it.
type Capped struct {
	R io.Reader
	N int64 // bytes left
}

func (c *Capped) Read(p []byte) (int, error) {
	if c.N <= 0 {
		// one byte more tells a body at the limit from a larger one
		var one [1]byte
		if k, _ := c.R.Read(one[:]); k > 0 {
			return 0, ErrTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.N {
		p = p[:c.N]
	}
	k, err := c.R.Read(p)
	c.N -= int64(k)
	return k, err
}
