package apikeys

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/admission"
)

// Bounds of a key file.
const (
	// MaxKeys bounds the keys of one file: every request is compared with
	// every key, so the bound is also a bound on that work.
	MaxKeys = 1024
	// MaxKeyLength bounds one key; real bearer tokens are far shorter, and a
	// bounded line keeps a wrong file (a binary, say) from being accepted.
	// A presented token longer than this cannot match any key.
	MaxKeyLength = 4096
	// maxKeyFileBytes bounds the key file read by Load.
	maxKeyFileBytes = MaxKeys * (MaxKeyLength + 1)
)

// Keys is a set of bearer tokens, each with the tenant its requests belong
// to. A request is allowed when its Authorization header carries one of
// them. Comparison is constant-time: the presented token and every key are
// compared as SHA-256 digests, and every key is compared on every request,
// so neither the matching key nor a matching prefix shows in the timing.
// The zero value allows nothing; a nil *Keys means authentication is off.
//
// The set of a Keys can be replaced while requests are checked (Watch
// does so when the key file changes): the set is immutable and swapped
// atomically, so a check sees either the whole old set or the whole new
// one. Keys is safe for concurrent use.
type Keys struct {
	set atomic.Pointer[keySet]
}

// keySet is one immutable set of key digests and their tenants.
type keySet struct {
	digests [][sha256.Size]byte
	// tenantOf holds, for each digest, its tenant's index in tenants.
	tenantOf []int
	// tenants are the distinct tenants of the file, in order of first
	// appearance; tenants[0] is the first key's.
	tenants []admission.Tenant
	// source is the SHA-256 of the file content the set was parsed from,
	// so that a poll can tell an unchanged file without parsing it.
	source [sha256.Size]byte
}

// The attributes a key line may carry after its token
// (docs/CONFIGURATION.md#41-tenants-and-priorities).
const (
	// tenantAttribute names the key's tenant.
	tenantAttribute = "tenant"
	// priorityAttribute gives the key's tenant its priority band.
	priorityAttribute = "priority"
)

// MaxTenantNameLength bounds a tenant name: 63 bytes is a DNS label's and
// a Kubernetes label value's bound, so a name fits wherever those do,
// metric labels and manifests included, and a log line stays short.
const MaxTenantNameLength = 63

// Parse reads one key per line. Blank lines and lines starting with "#"
// are skipped; surrounding spaces are trimmed. After the key, separated by
// spaces or tabs, a line may carry the attributes "tenant=NAME" and
// "priority=N", each at most once: NAME is 1..MaxTenantNameLength bytes of
// lowercase letters, digits, '.', '_' and '-', beginning and ending with a
// letter or digit; N is an integer within
// admission.MinPriority..admission.MaxPriority. A key without a tenant
// belongs to the tenant named "", and a key without a priority has
// priority 0. Keys naming the same tenant (the unnamed one included) must
// give it the same priority; the same key given twice must give the same
// tenant and priority both times. A key itself contains no space or tab,
// so every file valid without attributes reads as before.
//
// Parse returns an error wrapping ErrInvalidKeys, which names line
// numbers and never quotes a key, a tenant or a priority, when the file
// holds no key, more than MaxKeys keys, a line longer than MaxKeyLength, or
// an attribute that is unknown, repeated on its line or invalid, or when
// two lines disagree as above.
func Parse(data []byte) (*Keys, error) {
	s, err := parseKeySet(data)
	if err != nil {
		return nil, err
	}
	k := &Keys{}
	k.set.Store(s)
	return k, nil
}

// keyLine is where a key or a tenant was first given, and with what.
type keyLine struct {
	line   int
	tenant admission.Tenant
	index  int // a tenant's index in keySet.tenants; unused for a key.
}

// parseKeySet is Parse without the Keys around the set.
func parseKeySet(data []byte) (*keySet, error) {
	s := &keySet{source: sha256.Sum256(data)}
	keysSeen := make(map[[sha256.Size]byte]keyLine)
	tenantsSeen := make(map[string]keyLine)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxKeyLength+1)
	line := 1
	for ; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if len(text) > MaxKeyLength {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInvalidKeys, line, MaxKeyLength)
		}
		// Only a space or a tab separates the fields: a key read before
		// attributes existed could hold any other byte.
		fields := strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '\t' })
		tenant, err := parseKeyAttributes(line, fields[1:])
		if err != nil {
			return nil, err
		}
		if len(s.digests) == MaxKeys {
			return nil, fmt.Errorf("%w: more than %d keys", ErrInvalidKeys, MaxKeys)
		}
		digest := sha256.Sum256([]byte(fields[0]))
		if first, ok := keysSeen[digest]; ok && first.tenant != tenant {
			return nil, fmt.Errorf("%w: line %d gives the key of line %d another tenant or priority", ErrInvalidKeys, line, first.line)
		}
		first, ok := tenantsSeen[tenant.Name]
		switch {
		case !ok:
			first = keyLine{line: line, tenant: tenant, index: len(s.tenants)}
			tenantsSeen[tenant.Name] = first
			s.tenants = append(s.tenants, tenant)
		case first.tenant.Priority != tenant.Priority:
			return nil, fmt.Errorf("%w: line %d gives the tenant of line %d another priority", ErrInvalidKeys, line, first.line)
		}
		if _, ok := keysSeen[digest]; !ok {
			keysSeen[digest] = keyLine{line: line, tenant: tenant}
		}
		s.digests = append(s.digests, digest)
		s.tenantOf = append(s.tenantOf, first.index)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInvalidKeys, line, MaxKeyLength)
	}
	if len(s.digests) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrInvalidKeys)
	}
	return s, nil
}

// parseKeyAttributes reads the attributes after a key on line line. Its
// errors name the line and the field's position, never a field's content:
// a key mistakenly split by a space would otherwise be quoted.
func parseKeyAttributes(line int, fields []string) (admission.Tenant, error) {
	var tenant admission.Tenant
	var named, prioritized bool
	for i, field := range fields {
		pos := i + 2 // the key is field 1.
		name, value, ok := strings.Cut(field, "=")
		switch {
		case !ok:
			return admission.Tenant{}, fmt.Errorf("%w: line %d contains a space, and field %d is not an attribute (tenant=NAME or priority=N)",
				ErrInvalidKeys, line, pos)
		case name == tenantAttribute && named, name == priorityAttribute && prioritized:
			return admission.Tenant{}, fmt.Errorf("%w: line %d gives %s twice", ErrInvalidKeys, line, name)
		case name == tenantAttribute:
			if !ValidTenantName(value) {
				return admission.Tenant{}, fmt.Errorf("%w: line %d: the tenant is not 1..%d lowercase letters, digits, '.', '_' or '-' beginning and ending with a letter or digit",
					ErrInvalidKeys, line, MaxTenantNameLength)
			}
			tenant.Name, named = value, true
		case name == priorityAttribute:
			p, err := strconv.Atoi(value)
			if err != nil || p < admission.MinPriority || p > admission.MaxPriority {
				return admission.Tenant{}, fmt.Errorf("%w: line %d: the priority is not an integer within %d..%d",
					ErrInvalidKeys, line, admission.MinPriority, admission.MaxPriority)
			}
			tenant.Priority, prioritized = p, true
		default:
			return admission.Tenant{}, fmt.Errorf("%w: line %d: field %d is not a known attribute (tenant=NAME or priority=N)", ErrInvalidKeys, line, pos)
		}
	}
	return tenant, nil
}

// ValidTenantName reports whether s is a tenant name: 1..MaxTenantNameLength
// bytes of lowercase letters, digits, '.', '_' and '-', beginning and ending
// with a letter or digit. Such a name is safe in a log line, a metric label
// and a header value as it is.
func ValidTenantName(s string) bool {
	if s == "" || len(s) > MaxTenantNameLength {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i != 0 && i != len(s)-1:
		default:
			return false
		}
	}
	return true
}

// Load reads a key file with Parse. Errors name the file but never
// quote its content.
func Load(path string) (*Keys, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// readKeyFile reads at most maxKeyFileBytes of a key file.
func readKeyFile(path string) ([]byte, error) {
	fh, err := os.Open(path) //nolint:gosec // The operator names the file on the command line.
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot be opened", ErrInvalidKeys, path)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, maxKeyFileBytes+1))
	if err != nil || len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("%w: %s cannot be read or exceeds %d bytes", ErrInvalidKeys, path, maxKeyFileBytes)
	}
	return data, nil
}

// Len returns the number of keys.
func (k *Keys) Len() int {
	if s := k.set.Load(); s != nil {
		return len(s.digests)
	}
	return 0
}

// keyBuffers holds the buffers Authenticate hashes presented keys from.
var keyBuffers = sync.Pool{New: func() any { return new([MaxKeyLength]byte) }}

// Allow reports whether the request's Authorization header is "Bearer KEY"
// for one of the keys: Authenticate without the tenant. A nil *Keys allows
// every request. Allow does not allocate.
func (k *Keys) Allow(r *http.Request) bool {
	_, ok := k.Authenticate(r)
	return ok
}

// Authenticate reports whether the request's Authorization header is
// "Bearer KEY" for one of the keys, and returns that key's tenant. Every
// key is compared every time, and the match is selected without a branch
// on which key matched, so the timing of the comparisons shows neither the
// key nor its position in the file. A nil *Keys (authentication off)
// returns the zero Tenant and true; a refused request returns the zero
// Tenant and false. Authenticate does not allocate.
func (k *Keys) Authenticate(r *http.Request) (admission.Tenant, bool) {
	if k == nil {
		return admission.Tenant{}, true
	}
	s := k.set.Load()
	if s == nil {
		return admission.Tenant{}, false
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok || len(token) > MaxKeyLength {
		return admission.Tenant{}, false // no key is longer than MaxKeyLength.
	}
	// Hash from a pooled copy: converting the string would allocate, and a
	// copy on the stack would make every serving goroutine's stack outgrow
	// 8 KiB (docs/ROUTER.md#9-performance). The copy is cleared after.
	buf := keyBuffers.Get().(*[MaxKeyLength]byte)
	n := copy(buf[:], token)
	presented := sha256.Sum256(buf[:n])
	clear(buf[:n])
	keyBuffers.Put(buf)
	match, tenant := 0, 0
	for i := range s.digests {
		eq := subtle.ConstantTimeCompare(presented[:], s.digests[i][:])
		match |= eq
		tenant = subtle.ConstantTimeSelect(eq, s.tenantOf[i], tenant)
	}
	if match != 1 {
		return admission.Tenant{}, false
	}
	// The one read that depends on the match is of the tenant, which the
	// request's admission reveals anyway; never of the key.
	return s.tenants[tenant], true
}

// bearer extracts the token of a "Bearer TOKEN" credential; the scheme is
// case-insensitive.
func bearer(header string) (string, bool) {
	const prefix = "Bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(header[len(prefix):]), true
}
