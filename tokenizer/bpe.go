package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel is a BPE model with merges applied by rank, lowest first and
// leftmost among equal ranks (HF tokenizers' and llama.cpp's order).
type bpeModel struct {
	vocab  map[string]int
	merges map[uint64]uint64 // left<<32|right -> rank<<32|merged id

	unk          int // -1 when none
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	contPrefix   string
	endSuffix    string
	fallbackIDs  [256]int32 // ids of <0xNN>, -1 when absent

	// raw is set when the byte-level mapping is the last pre-tokenizer
	// step: words arrive as raw bytes and rawIDs maps each byte to the id
	// of its byte-level character.
	raw      bool
	rawIDs   [256]int32
	rawVocab map[string]int // raw-byte spelling -> id, for ignoreMerges

	chunkAtSpace bool // see canChunkAtSpace

	cache wordCache
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (m *bpeModel) addMerge(a, b string, rank int) {
	ia, ok1 := m.vocab[a]
	ib, ok2 := m.vocab[b]
	im, ok3 := m.vocab[a+b]
	if !ok1 || !ok2 || !ok3 {
		// HF rejects such a file; llama.cpp ignores the merge. Ignoring
		// keeps odd vocabularies usable.
		return
	}
	k := pairKey(int32(ia), int32(ib))
	if _, dup := m.merges[k]; dup {
		return // the first (lowest) rank wins
	}
	m.merges[k] = uint64(uint32(rank))<<32 | uint64(uint32(im))
}

func (m *bpeModel) init() {
	for b := 0; b < 256; b++ {
		m.fallbackIDs[b] = -1
		if id, ok := m.vocab[byteTokenName(byte(b))]; ok {
			m.fallbackIDs[b] = int32(id)
		}
		m.rawIDs[b] = -1
		if id, ok := m.vocab[byteToStr[b]]; ok {
			m.rawIDs[b] = int32(id)
		}
	}
	m.chunkAtSpace = !m.raw && canChunkAtSpace(m.vocab)
	if m.raw && m.ignoreMerges {
		m.rawVocab = make(map[string]int, len(m.vocab))
		for tok, id := range m.vocab {
			if raw, ok := byteLevelDecode(tok); ok {
				m.rawVocab[string(raw)] = id
			}
		}
	}
}

const hexDigits = "0123456789ABCDEF"

func byteTokenName(b byte) string {
	return string([]byte{'<', '0', 'x', hexDigits[b>>4], hexDigits[b&15], '>'})
}

// encodeWord appends the ids of one pre-tokenized word.
func (m *bpeModel) encodeWord(w string, dst []int) []int {
	if w == "" {
		return dst
	}
	if m.chunkAtSpace && len(w) > 16 && strings.Contains(w[1:], spmSpace) {
		eachSpaceChunk(w, func(c string) { dst = m.encodeChunk(c, dst) })
		return dst
	}
	return m.encodeChunk(w, dst)
}

func (m *bpeModel) encodeChunk(w string, dst []int) []int {
	if ids, ok := m.cache.get(w); ok {
		for _, id := range ids {
			dst = append(dst, int(id))
		}
		return dst
	}
	if m.ignoreMerges {
		var id int
		var ok bool
		if m.raw {
			id, ok = m.rawVocab[w]
		} else {
			id, ok = m.vocab[w]
		}
		if ok {
			m.cache.put(w, []int32{int32(id)})
			return append(dst, id)
		}
	}
	var stack [64]int32
	syms := m.initial(w, stack[:0])
	if len(syms) > 1 {
		if len(syms) <= 48 {
			syms = m.mergeLinear(syms)
		} else {
			syms = m.mergeHeap(syms)
		}
	}
	if len(w) <= 256 {
		m.cache.put(w, append([]int32(nil), syms...))
	}
	for _, id := range syms {
		dst = append(dst, int(id))
	}
	return dst
}

// initial returns the starting symbols of w: one per character (per byte
// in raw mode), with byte fallback and unknown-token handling as HF does.
func (m *bpeModel) initial(w string, syms []int32) []int32 {
	if m.raw {
		for i := 0; i < len(w); i++ {
			if id := m.rawIDs[w[i]]; id >= 0 {
				syms = append(syms, id)
			} else if m.unk >= 0 {
				syms = m.pushUnk(syms)
			}
		}
		return syms
	}
	lastUnk := false
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		ch := w[i : i+n]
		tok := ch
		if m.contPrefix != "" && i > 0 {
			tok = m.contPrefix + tok
		}
		if m.endSuffix != "" && i+n == len(w) {
			tok += m.endSuffix
		}
		i += n
		if id, ok := m.vocab[tok]; ok {
			syms = append(syms, int32(id))
			lastUnk = false
			continue
		}
		if m.byteFallback {
			all := true
			for k := 0; k < len(ch); k++ {
				if m.fallbackIDs[ch[k]] < 0 {
					all = false
					break
				}
			}
			if all {
				for k := 0; k < len(ch); k++ {
					syms = append(syms, m.fallbackIDs[ch[k]])
				}
				lastUnk = false
				continue
			}
		}
		if m.unk >= 0 {
			if !(m.fuseUnk && lastUnk) {
				syms = append(syms, int32(m.unk))
			}
			lastUnk = true
		}
	}
	return syms
}

func (m *bpeModel) pushUnk(syms []int32) []int32 {
	if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1] == int32(m.unk) {
		return syms
	}
	return append(syms, int32(m.unk))
}

const noRank = ^uint32(0)

// mergeLinear is the quadratic merge for short words: pair ranks are
// kept in an array and refreshed only next to a merge.
func (m *bpeModel) mergeLinear(syms []int32) []int32 {
	var rstack [48]uint64
	pr := rstack[:len(syms)-1]
	look := func(i int) uint64 {
		if v, ok := m.merges[pairKey(syms[i], syms[i+1])]; ok {
			return v
		}
		return uint64(noRank) << 32
	}
	for i := range pr {
		pr[i] = look(i)
	}
	for len(syms) > 1 {
		best, pos := noRank, -1
		for i, v := range pr {
			if r := uint32(v >> 32); r < best {
				best, pos = r, i
			}
		}
		if pos < 0 {
			break
		}
		syms[pos] = int32(uint32(pr[pos]))
		copy(syms[pos+1:], syms[pos+2:])
		syms = syms[:len(syms)-1]
		copy(pr[pos:], pr[pos+1:])
		pr = pr[:len(pr)-1]
		if pos > 0 {
			pr[pos-1] = look(pos - 1)
		}
		if pos < len(pr) {
			pr[pos] = look(pos)
		}
	}
	return syms
}

type mergeCand struct {
	rank  uint32
	pos   int32 // left symbol index
	right int32 // right symbol index when queued
	left  int32 // left id when queued
	rid   int32 // right id when queued
}

func candLess(a, b mergeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

type candHeap []mergeCand

func (h *candHeap) push(c mergeCand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !candLess(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() mergeCand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && candLess(s[r], s[l]) {
			c = r
		}
		if !candLess(s[c], s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// mergeHeap is the O(n log n) merge for long words (CJK runs, long
// repeats): a linked list of symbols and a lazily invalidated heap.
func (m *bpeModel) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	ids := append([]int32(nil), syms...)
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := range n {
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	next[n-1] = -1
	h := make(candHeap, 0, n)
	try := func(l int32) {
		if l < 0 || next[l] < 0 {
			return
		}
		r := next[l]
		if v, ok := m.merges[pairKey(ids[l], ids[r])]; ok {
			h.push(mergeCand{rank: uint32(v >> 32), pos: l, right: r, left: ids[l], rid: ids[r]})
		}
	}
	for i := 0; i < n-1; i++ {
		try(int32(i))
	}
	for len(h) > 0 {
		c := h.pop()
		l := c.pos
		if ids[l] != c.left || next[l] != c.right || c.right < 0 || ids[c.right] != c.rid {
			continue // stale
		}
		v := m.merges[pairKey(c.left, c.rid)]
		ids[l] = int32(uint32(v))
		r := c.right
		ids[r] = -1
		nr := next[r]
		next[l] = nr
		if nr >= 0 {
			prev[nr] = l
		}
		next[r] = -1
		if p := prev[l]; p >= 0 {
			try(p)
		}
		try(l)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

// wordCache memoizes word encodings. It is bounded: when full it is
// dropped and refilled, which keeps memory flat on adversarial input.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const wordCacheMax = 1 << 16

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= wordCacheMax {
		c.m = make(map[string][]int32, 1024)
	}
	c.m[strings.Clone(w)] = ids
	c.mu.Unlock()
}
