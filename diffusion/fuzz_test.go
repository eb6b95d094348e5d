package diffusion

import "testing"

// FuzzConfigs: the three config parsers take any bytes without panicking,
// and what they accept is usable (positive sizes).
func FuzzConfigs(f *testing.F) {
	for _, s := range []string{
		`{"num_train_timesteps": 1000, "shift": 3.0}`,
		`{"use_dynamic_shifting": true, "base_image_seq_len": 256, "max_image_seq_len": 256}`,
		`{"dim": 64, "n_heads": 2, "axes_dims": [8, 12, 12], "axes_lens": [256, 64, 64], "cap_feat_dim": 48, "n_refiner_layers": 1}`,
		`{"dim": 0, "n_heads": 0}`,
		`{"latent_channels": 16, "block_out_channels": [8, 16], "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"], "norm_num_groups": 4}`,
		`{"block_out_channels": [], "up_block_types": []}`,
		`null`, `[]`, `{"shift": "x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ParseScheduler(b); err == nil {
			s.Sigmas(3, 64)
		}
		if c, err := parseDiTConfig(b); err == nil {
			if c.Dim <= 0 || c.Heads <= 0 || c.Dim%c.Heads != 0 || len(c.AxesDims) != 3 {
				t.Fatalf("accepted %+v", c)
			}
		}
		if c, err := parseVAEConfig(b); err == nil {
			if len(c.BlockOutChannels) == 0 || c.NormNumGroups <= 0 {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
