package evidence

import (
	"bytes"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"

	tabi "github.com/google/go-tdx-guest/abi"
	tpb "github.com/google/go-tdx-guest/proto/tdx"
)

// The layout of a version 4 TDX quote, as far as DecodeTDX checks it before
// go-tdx-guest parses the quote.
const (
	tdxQuoteVersion      = 4
	tdxSignedDataStart   = 0x27C // header (0x30), TD quote body (0x248), signed data size (4)
	tdxCertDataStart     = 0x80  // in the signed data: signature (0x40), attestation key (0x40)
	tdxTypeAndSize       = 6     // a certification data type (2) and size (4)
	tdxQEAuthDataStart   = 0x1C0 // in the QE report certification data: QE report (0x180), signature (0x40)
	tdxQEAuthSizeSize    = 2
	tdxPCKChainCertCount = 3 // PCK, intermediate CA, root CA
)

// DecodeTDX decodes a version 4 TDX quote. It refuses a quote whose sizes
// disagree with its length, that has bytes after its signed data, or whose
// PCK certificate chain is not exactly three certificates in canonical PEM,
// optionally followed by one NUL byte as quoting enclaves write it.
func DecodeTDX(raw []byte) (*tpb.QuoteV4, error) {
	if err := checkTDXLayout(raw); err != nil {
		return nil, err
	}
	parsed, err := tabi.QuoteToProto(raw)
	if err != nil {
		return nil, err
	}
	quote, ok := parsed.(*tpb.QuoteV4)
	if !ok {
		return nil, fmt.Errorf("quote is a %T, want a version 4 quote", parsed)
	}
	if again, err := tabi.QuoteToAbiBytes(quote); err != nil || !bytes.Equal(again, raw) {
		return nil, errors.New("quote does not encode back to the same bytes")
	}
	chain := quote.GetSignedData().GetCertificationData().GetQeReportCertificationData().GetPckCertificateChainData().GetPckCertChain()
	if err := checkPCKChainPEM(chain); err != nil {
		return nil, err
	}
	return quote, nil
}

// checkTDXLayout walks the sizes of a quote so that every slice the parser
// takes lies inside it, and no byte lies outside what it parses.
func checkTDXLayout(raw []byte) error {
	if len(raw) < tdxSignedDataStart {
		return fmt.Errorf("quote is %d bytes, shorter than its header and body (%d)", len(raw), tdxSignedDataStart)
	}
	if v := binary.LittleEndian.Uint16(raw[0:2]); v != tdxQuoteVersion {
		return fmt.Errorf("quote version is %d, want %d", v, tdxQuoteVersion)
	}
	signedSize := uint64(binary.LittleEndian.Uint32(raw[tdxSignedDataStart-4 : tdxSignedDataStart]))
	if tdxSignedDataStart+signedSize != uint64(len(raw)) {
		return fmt.Errorf("quote is %d bytes, its signed data size says %d", len(raw), tdxSignedDataStart+signedSize)
	}
	signed := raw[tdxSignedDataStart:]
	if len(signed) < tdxCertDataStart+tdxTypeAndSize {
		return errors.New("quote signed data is too short for its certification data")
	}
	cert := signed[tdxCertDataStart:]
	if size := uint64(binary.LittleEndian.Uint32(cert[2:6])); size != uint64(len(cert)-tdxTypeAndSize) {
		return fmt.Errorf("quote certification data is %d bytes, its size says %d", len(cert)-tdxTypeAndSize, size)
	}
	qe := cert[tdxTypeAndSize:]
	if len(qe) < tdxQEAuthDataStart+tdxQEAuthSizeSize {
		return errors.New("quote QE report certification data is too short")
	}
	authEnd := tdxQEAuthDataStart + tdxQEAuthSizeSize + int(binary.LittleEndian.Uint16(qe[tdxQEAuthDataStart:]))
	if len(qe) < authEnd+tdxTypeAndSize {
		return errors.New("quote QE authentication data runs past the PCK certificate chain")
	}
	pck := qe[authEnd:]
	if size := uint64(binary.LittleEndian.Uint32(pck[2:6])); size != uint64(len(pck)-tdxTypeAndSize) {
		return fmt.Errorf("quote PCK certificate chain is %d bytes, its size says %d", len(pck)-tdxTypeAndSize, size)
	}
	return nil
}

// checkPCKChainPEM accepts only the PEM encoding/pem writes for the three
// certificates, so that no text around or inside the blocks goes
// unchecked.
func checkPCKChainPEM(chain []byte) error {
	rest := bytes.TrimSuffix(chain, []byte{0})
	var canonical []byte
	for i := 0; i < tdxPCKChainCertCount; i++ {
		block, next := pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			return fmt.Errorf("PCK certificate chain block %d is not a PEM certificate", i)
		}
		canonical = append(canonical, pem.EncodeToMemory(block)...)
		rest = next
	}
	if len(rest) != 0 {
		return fmt.Errorf("PCK certificate chain has %d bytes after its %d certificates", len(rest), tdxPCKChainCertCount)
	}
	if !bytes.Equal(canonical, bytes.TrimSuffix(chain, []byte{0})) {
		return errors.New("PCK certificate chain is not in canonical PEM")
	}
	return nil
}
