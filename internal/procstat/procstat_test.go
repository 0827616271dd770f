//go:build linux

package procstat

import (
	"errors"
	"os"
	"strings"
	"testing"
)

const statusSample = `Name:	router
Umask:	0022
State:	S (sleeping)
VmPeak:	 1850600 kB
VmSize:	 1850600 kB
VmHWM:	   61232 kB
VmRSS:	   48100 kB
RssAnon:	   30000 kB
RssFile:	   18000 kB
Threads:	9
`

func TestParse(t *testing.T) {
	st, err := Parse([]byte(statusSample))
	if err != nil {
		t.Fatal(err)
	}
	if st != (Memory{RSSKiB: 48100, HWMKiB: 61232, Threads: 9, AnonKiB: 30000, FileKiB: 18000}) {
		t.Fatalf("status = %+v", st)
	}
	for _, drop := range []string{"VmRSS", "VmHWM", "Threads"} {
		t.Run("without "+drop, func(t *testing.T) {
			var kept []string
			for _, l := range strings.Split(statusSample, "\n") {
				if !strings.HasPrefix(l, drop+":") {
					kept = append(kept, l)
				}
			}
			if _, err := Parse([]byte(strings.Join(kept, "\n"))); !errors.Is(err, ErrStatus) {
				t.Fatalf("error = %v, want ErrStatus", err)
			}
		})
	}
	if _, err := Parse([]byte("VmRSS:\t12 MB\nVmHWM:\t1 kB\nThreads:\t1\n")); !errors.Is(err, ErrStatus) {
		t.Fatalf("unit MB accepted: %v", err)
	}
	if _, err := Parse([]byte("VmRSS:\t12 kB\nVmHWM:\t12 kB\nThreads:\t1\nRssAnon:\tmany kB\n")); !errors.Is(err, ErrStatus) {
		t.Fatalf("an unreadable RssAnon accepted: %v", err)
	}
	st, err = Parse([]byte("VmRSS:\t12 kB\nVmHWM:\t12 kB\nThreads:\t1\n"))
	if err != nil || st.AnonKiB != 0 || st.FileKiB != 0 {
		t.Fatalf("a status without RssAnon and RssFile: %+v, %v", st, err)
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSSKiB <= 0 || st.HWMKiB < st.RSSKiB || st.Threads < 1 || st.AnonKiB <= 0 || st.AnonKiB+st.FileKiB > st.RSSKiB {
		t.Fatalf("implausible status of this test process: %+v", st)
	}
}
