package pullmodel

// CompactMetadata is compactMetadata, for the external tests.
var CompactMetadata = compactMetadata
