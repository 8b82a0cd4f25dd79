"""notifications"""
