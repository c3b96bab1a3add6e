package evidence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/uuid"
)

// SNPReportSize is the size of an SEV-SNP attestation report.
const SNPReportSize = abi.ReportSize

// maxSNPTableEntries bounds the certificate table an attester's device may
// return; real tables have at most five entries.
const maxSNPTableEntries = 64

// SNPCerts are the DER certificates that come with an SEV-SNP report. The
// VCEK (or, on some clouds, the VLEK) signs the report; the ASK and ARK are
// optional, since the verifier uses its own copies of the roots and refuses
// evidence whose copies differ from them.
type SNPCerts struct {
	ARK, ASK, VCEK, VLEK []byte
}

// The entries of a certificate table in the order encoding writes them.
var snpEntryOrder = []struct {
	guid uuid.UUID
	name string
	cert func(*SNPCerts) *[]byte
}{
	{uuid.MustParse(abi.ArkGUID), "ARK", func(c *SNPCerts) *[]byte { return &c.ARK }},
	{uuid.MustParse(abi.AskGUID), "ASK", func(c *SNPCerts) *[]byte { return &c.ASK }},
	{uuid.MustParse(abi.VcekGUID), "VCEK", func(c *SNPCerts) *[]byte { return &c.VCEK }},
	{uuid.MustParse(abi.VlekGUID), "VLEK", func(c *SNPCerts) *[]byte { return &c.VLEK }},
}

// EncodeSNP returns SEV-SNP evidence: the report followed by a certificate
// table of the certificates that are set.
func EncodeSNP(report []byte, certs SNPCerts) ([]byte, error) {
	if len(report) != SNPReportSize {
		return nil, fmt.Errorf("report is %d bytes, want %d", len(report), SNPReportSize)
	}
	var blobs [][]byte
	var guids []uuid.UUID
	for _, e := range snpEntryOrder {
		if cert := *e.cert(&certs); len(cert) > 0 {
			blobs = append(blobs, cert)
			guids = append(guids, e.guid)
		}
	}
	out := bytes.Clone(report)
	if len(blobs) == 0 {
		return out, nil
	}
	header := make([]byte, (len(blobs)+1)*abi.CertTableEntrySize)
	offset := uint64(len(header))
	for i, blob := range blobs {
		if offset+uint64(len(blob)) > 1<<32-1 {
			return nil, errors.New("certificate table exceeds 4 GiB")
		}
		entry := header[i*abi.CertTableEntrySize:]
		copy(entry, guids[i][:])
		binary.LittleEndian.PutUint32(entry[16:20], uint32(offset))
		binary.LittleEndian.PutUint32(entry[20:24], uint32(len(blob)))
		offset += uint64(len(blob))
	}
	out = append(out, header...)
	for _, blob := range blobs {
		out = append(out, blob...)
	}
	return out, nil
}

// NormalizeSNP turns a report and the certificate table the guest device
// returned with it, which may be padded and may hold entries the verifier
// does not use, into the evidence EncodeSNP writes. It is for the attester;
// it checks the table's bounds, not its certificates.
func NormalizeSNP(report, table []byte) ([]byte, error) {
	entries, _, err := snpTableEntries(table)
	if err != nil {
		return nil, err
	}
	var certs SNPCerts
	for _, entry := range entries {
		for _, e := range snpEntryOrder {
			if entry.guid != e.guid {
				continue
			}
			cert := e.cert(&certs)
			if len(*cert) > 0 {
				return nil, fmt.Errorf("certificate table has two %s entries", e.name)
			}
			end := uint64(entry.offset) + uint64(entry.length)
			if end > uint64(len(table)) {
				return nil, fmt.Errorf("certificate table %s entry ends at %d, past the table's %d bytes", e.name, end, len(table))
			}
			*cert = bytes.Clone(table[entry.offset:end])
		}
	}
	return EncodeSNP(report, certs)
}

// DecodeSNP decodes SEV-SNP evidence in the form EncodeSNP writes, and
// refuses any other. The result is what go-sev-guest verifies.
func DecodeSNP(raw []byte) (*spb.Attestation, error) {
	if len(raw) < SNPReportSize {
		return nil, fmt.Errorf("evidence is %d bytes, shorter than an SEV-SNP report (%d)", len(raw), SNPReportSize)
	}
	rawReport, table := raw[:SNPReportSize], raw[SNPReportSize:]
	if err := abi.ValidateReportFormat(rawReport); err != nil {
		return nil, err
	}
	report, err := abi.ReportToProto(rawReport)
	if err != nil {
		return nil, err
	}
	// The report's reserved bytes must be zero, which ReportToProto checks
	// for most of them; this catches the rest, for the signature covers the
	// bytes the verifier re-encodes, not the ones it received.
	if again, err := abi.ReportToAbiBytes(report); err != nil || !bytes.Equal(again, rawReport) {
		return nil, errors.New("report has bytes outside its defined fields")
	}
	certs, err := decodeSNPTable(table)
	if err != nil {
		return nil, err
	}
	return &spb.Attestation{
		Report: report,
		CertificateChain: &spb.CertificateChain{
			ArkCert:  certs.ARK,
			AskCert:  certs.ASK,
			VcekCert: certs.VCEK,
			VlekCert: certs.VLEK,
			Extras:   map[string][]byte{},
		},
	}, nil
}

// decodeSNPTable decodes a certificate table in canonical form: known
// entries in encoding order, each certificate right after the previous one,
// nothing after the last.
func decodeSNPTable(table []byte) (SNPCerts, error) {
	var certs SNPCerts
	if len(table) == 0 {
		return certs, nil
	}
	entries, headerSize, err := snpTableEntries(table)
	if err != nil {
		return certs, err
	}
	if len(entries) == 0 {
		return certs, errors.New("certificate table has no entries; leave it out instead")
	}
	next := 0 // index into snpEntryOrder
	cursor := uint64(headerSize)
	for _, entry := range entries {
		for next < len(snpEntryOrder) && snpEntryOrder[next].guid != entry.guid {
			next++
		}
		if next == len(snpEntryOrder) {
			return certs, fmt.Errorf("certificate table entry %s is unknown, repeated or out of order", entry.guid)
		}
		e := snpEntryOrder[next]
		next++
		if uint64(entry.offset) != cursor || entry.length == 0 {
			return certs, fmt.Errorf("certificate table %s entry is at %d+%d, want %d and a certificate", e.name, entry.offset, entry.length, cursor)
		}
		end := cursor + uint64(entry.length)
		if end > uint64(len(table)) {
			return certs, fmt.Errorf("certificate table %s entry ends at %d, past the table's %d bytes", e.name, end, len(table))
		}
		*e.cert(&certs) = bytes.Clone(table[cursor:end])
		cursor = end
	}
	if cursor != uint64(len(table)) {
		return certs, fmt.Errorf("certificate table has %d bytes after its last certificate", uint64(len(table))-cursor)
	}
	return certs, nil
}

type snpTableEntry struct {
	guid           uuid.UUID
	offset, length uint32
}

// snpTableEntries reads a certificate table's header up to its all-zero
// entry and returns the entries and the header's size.
func snpTableEntries(table []byte) ([]snpTableEntry, int, error) {
	var entries []snpTableEntry
	for i := 0; ; i++ {
		start := i * abi.CertTableEntrySize
		if start+abi.CertTableEntrySize > len(table) {
			return nil, 0, errors.New("certificate table header has no terminating entry")
		}
		raw := table[start : start+abi.CertTableEntrySize]
		var entry snpTableEntry
		copy(entry.guid[:], raw[:16])
		entry.offset = binary.LittleEndian.Uint32(raw[16:20])
		entry.length = binary.LittleEndian.Uint32(raw[20:24])
		if entry == (snpTableEntry{}) {
			return entries, start + abi.CertTableEntrySize, nil
		}
		if i == maxSNPTableEntries {
			return nil, 0, fmt.Errorf("certificate table has more than %d entries", maxSNPTableEntries)
		}
		entries = append(entries, entry)
	}
}
