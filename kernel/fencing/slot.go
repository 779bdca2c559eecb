package fencing

// SlotCount is the number of hash slots of a Redis/Valkey cluster.
const SlotCount = 16384

// Slot returns the cluster hash slot of key: CRC16 (XMODEM) of the key, or of its hash tag
// when it has one, modulo 16384. Knowing the slot lets a client refuse a cross-slot script
// before sending it (valkey-go panics on one in cluster mode) and lets tests pick keys that
// share or avoid a node.
func Slot(key string) uint16 {
	return crc16(HashTag(key)) % SlotCount
}

// HashTag returns the part of key that is hashed: the text between the first "{" and the next
// "}" when that text is non-empty, otherwise the whole key.
func HashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key // "{}" is not a tag: the whole key is hashed
				}
				return key[i+1 : j]
			}
		}
		return key // no closing brace
	}
	return key
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the checksum the
// cluster specification names for key distribution.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
