package log

import (
	"io"
	"os"
)

// maxIOV is Linux's IOV_MAX: the most buffers one pwritev takes.
const maxIOV = 1024

// WriteVectorAt writes bufs back to back at off, as one WriteAt of their
// concatenation would, without concatenating them: an *os.File takes
// them in as few pwritev calls as the kernel allows, any other File (a
// test's fault-injecting one) one WriteAt per buffer. It returns the
// bytes written; bufs is left as it was.
func WriteVectorAt(f File, bufs [][]byte, off int64) (int64, error) {
	if osf, ok := f.(*os.File); ok && len(bufs) > 1 {
		return pwritev(osf, bufs, off)
	}
	return writeEach(f, bufs, off)
}

// writeEach writes bufs back to back at off, one WriteAt per buffer.
func writeEach(f io.WriterAt, bufs [][]byte, off int64) (int64, error) {
	var total int64
	for _, b := range bufs {
		n, err := f.WriteAt(b, off+total)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
