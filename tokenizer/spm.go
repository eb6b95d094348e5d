package tokenizer

// spmModel is llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm): the
// input's characters are merged pairwise, always taking the adjacent pair
// whose concatenation is the vocabulary piece with the highest score
// (leftmost on ties); a final piece outside the vocabulary becomes its
// <0xNN> byte tokens.
type spmModel struct {
	vocab       map[string]int
	scores      []float32
	fallbackIDs [256]int32
	unk         int

	chunkAtSpace bool // see canChunkAtSpace
	cache        wordCache
}

// encode tokenizes already-escaped text (spaces as U+2581).
func (m *spmModel) encode(text string, dst []int) []int {
	if !m.chunkAtSpace {
		return m.encodeChunk(text, dst)
	}
	eachSpaceChunk(text, func(c string) {
		if ids, ok := m.cache.get(c); ok {
			for _, id := range ids {
				dst = append(dst, int(id))
			}
			return
		}
		n := len(dst)
		dst = m.encodeChunk(c, dst)
		if len(c) <= 256 {
			ids := make([]int32, len(dst)-n)
			for i, id := range dst[n:] {
				ids[i] = int32(id)
			}
			m.cache.put(c, ids)
		}
	})
	return dst
}

type spmSym struct {
	start, n   int
	prev, next int
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
}

func spmLess(a, b spmBigram) bool { // a has priority over b
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

type spmHeap []spmBigram

func (h *spmHeap) push(c spmBigram) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !spmLess(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *spmHeap) pop() spmBigram {
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
		if r := l + 1; r < n && spmLess(s[r], s[l]) {
			c = r
		}
		if !spmLess(s[c], s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

func (m *spmModel) encodeChunk(text string, dst []int) []int {
	if text == "" {
		return dst
	}
	syms := make([]spmSym, 0, len(text))
	for off := 0; off < len(text); {
		// llama.cpp steps by the length its lead byte announces.
		n := utf8SeqLen(text[off])
		if off+n > len(text) {
			n = len(text) - off
		}
		syms = append(syms, spmSym{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	syms[len(syms)-1].next = -1
	h := make(spmHeap, 0, len(syms))
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		piece := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := m.vocab[piece]
		if !ok || id >= len(m.scores) {
			return
		}
		h.push(spmBigram{left: l, right: r, score: m.scores[id], size: len(piece)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		b := h.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := m.vocab[piece]; ok {
			dst = append(dst, id)
			continue
		}
		for k := 0; k < len(piece); k++ {
			if id := m.fallbackIDs[piece[k]]; id >= 0 {
				dst = append(dst, int(id))
			} else if m.unk >= 0 {
				dst = append(dst, m.unk)
			}
		}
	}
	return dst
}

// utf8SeqLen is the sequence length a UTF-8 lead byte announces (1 for
// continuation or invalid bytes), as llama.cpp's unicode_len_utf8.
func utf8SeqLen(c byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[c>>4]
}
